"""The gateway's configuration, read and checked; nothing here starts anything."""

"""The gateway's configuration: the file (`file`), its bearer-token and JWT entries (`auth`), and
how a value is read from the environment or a file (`values`). Nothing here starts anything."""

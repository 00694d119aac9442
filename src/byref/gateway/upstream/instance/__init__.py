"""One upstream instance: its process, transport and connection, and every operation asked of it,
bounded."""

"""What only the 2026-07-28 revision asks of the gateway's client side."""

"""Who a request runs as, and what the requests of one scope share."""

"""The gateway's client side: the upstream servers, who shares each instance, and what each is
asked."""

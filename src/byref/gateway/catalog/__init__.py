"""What the gateway offers a client: its tools, built once per change, and each upstream tool behind
them."""

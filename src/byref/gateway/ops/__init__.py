"""What an operator reads (start-up checks, metrics, traces): metadata only, never a tool result,
ref or secret."""

"""What an operator reads: start-up checks (`health`), Prometheus metrics (`metrics`) and
OpenTelemetry spans (`telemetry`). Metadata only: no tool result, ref or secret."""

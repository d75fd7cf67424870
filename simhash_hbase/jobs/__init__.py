"""Long jobs on the client API: ingest (with its report and checkpoint), dedup, verify."""

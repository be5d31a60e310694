//! I/O traces: capture any device's requests to a file; parse and replay them.

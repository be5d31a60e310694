//! I/O queue that merges adjacent writes, never an atomic write with a normal one.

//! Crash tests.

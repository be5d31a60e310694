//! Offline verification.

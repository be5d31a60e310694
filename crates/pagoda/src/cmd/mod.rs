//! Subcommands, one module each.

pub mod crashtest;
pub mod inspect;
pub mod ssd;

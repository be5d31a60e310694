//! Subcommands, one module each.

pub mod ssd;

//! Subcommands, one module each.

pub mod advise;
pub mod bench;
pub mod crashtest;
pub mod inspect;
pub mod reproduce;
pub mod ssd;

//! Subcommands, one module each.

pub mod advise;
pub mod bench;
pub mod crashtest;
pub mod docs;
pub mod inspect;
pub mod mount;
pub mod reproduce;
pub mod ssd;

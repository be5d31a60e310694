//! The `pagoda` crate: the command-line tool (`src/main.rs`), the adapter that puts the
//! engine behind the workload crate's `Store` trait (public so that tests and other drivers
//! can use it), and the pieces its binaries share (`cli`).

#![warn(missing_docs)]

pub mod cli;
pub mod store;

//! The `pagoda` crate: the command-line tool (`src/main.rs`) and the adapter that puts the
//! engine behind the workload crate's `Store` trait, public so that tests and other drivers
//! can use it.

pub mod store;

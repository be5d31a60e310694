//! The `pagoda` crate: the command-line tool (`src/main.rs`) and the pieces its binaries
//! share (`cli`). The engine's adapter to the workload crate's `Store` trait is
//! `pagoda_peers::PagodaStore`, beside the peers' adapters.

#![warn(missing_docs)]

pub mod cli;

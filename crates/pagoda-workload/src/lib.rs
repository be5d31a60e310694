//! pagoda's workload lab (docs to be completed).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod codec;
pub mod dist;
pub mod driver;
pub mod error;
pub mod linkbench;
pub mod report;
pub mod store;
pub mod tpcc;
pub mod ycsb;

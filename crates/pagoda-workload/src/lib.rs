//! pagoda's workload lab: YCSB, TPC-C and LinkBench generators, a multi-threaded driver and
//! result reports, all over the engine-agnostic [`Store`] trait.
//!
//! # Shape
//! - [`store`]: the [`Store`] / [`StoreTxn`] seam and [`MemStore`], the in-memory reference
//!   engine (`mem`).
//! - [`dist`]: key-choice distributions (zipfian, scrambled zipfian, latest, hotspot), FNV,
//!   the acknowledged insert counter.
//! - [`driver`]: client threads, op-count or timed runs, warm-up/ramp-up, conflict retries,
//!   latency histograms, progress callbacks, parallel loading.
//! - [`report`]: [`RunReport`] (what `pagoda bench --json` writes) and its text renderings.
//! - [`ycsb`], [`tpcc`], [`linkbench`]: the workloads, each with `XConfig::validate`, `load`
//!   and `run` (and `tpcc::check`).
//! - [`dbbench`]: db_bench-named micro-benchmarks and its result line.
//! - [`codec`]: the row format of the TPC-C and LinkBench tables.
//!
//! # Using it
//! ```
//! use pagoda_workload::{ycsb, DriverConfig, MemStore, RunLimit};
//! let store = MemStore::new();
//! let cfg = ycsb::YcsbConfig::new(ycsb::YcsbWorkload::A, 1000);
//! ycsb::load(&store, &cfg, 2, 42, None)?;
//! let run = DriverConfig { threads: 2, limit: RunLimit::Ops(2000), ..DriverConfig::default() };
//! let report = ycsb::run(&store, &cfg, &run, None)?;
//! assert_eq!(report.ops, 2000);
//! println!("{}", pagoda_workload::render_ycsb(&report));
//! # Ok::<(), pagoda_workload::WorkloadError>(())
//! ```
//!
//! # Deliberate differences from the original tools
//! **All workloads.** Each client thread owns its generators and a seeded random source (YCSB
//! shares synchronized generators), so a single-threaded run is reproducible from `--seed`.
//! An operation's latency includes its conflict retries; conflicts are counted per operation.
//! A failed operation is counted and the run goes on (the first error is in the report).
//! Latency percentiles come from HdrHistogram (3 significant digits) in every report format.
//!
//! **YCSB** ([`ycsb`]). A record is one value: a single field is stored raw; several are
//! length-prefixed (see the module docs). UPDATE of a multi-field record is a read-merge-write of
//! the one field in one transaction (what YCSB's key-value bindings do); with one field it is a
//! blind write. Values are printable ASCII `!`..`~`. The loader inserts 100 records per transaction
//! instead of one. The FNV hash of the single input whose Java `Math.abs` stays negative is taken
//! as 2^63. For timed runs the zipfian key space is the record count (YCSB adds twice the expected
//! inserts, which needs an op count; we do that for op-count runs). Every workload, update-only
//! (the WiredTiger paper's) included, has YCSB's key space by default (hashed key numbers, zero
//! padding 1), so one load serves them all; that paper asked for 20-byte keys, which
//! `insert_order = Ordered, zero_padding = 16` still give. An ordered key space is loaded through
//! [`store::Store::bulk_load`] in key order.
//!
//! **TPC-C** ([`tpcc`]), as tpcc-mysql runs it with its bugs fixed. The mix is a weighted draw
//! 45/43/4/4/4, not the 23-card deck. NURand's C constants come from the seed (tpcc-mysql reads
//! uninitialised memory); the load constant depends only on the seed, so running with the
//! load's seed satisfies the C-delta rule. Delivery runs each district in its own transaction
//! (clause 2.7.4.2 allows it; it shortens conflicts) and is timed over all ten. Money is kept
//! in cents and rates in 1/10,000, so consistency condition 1 is exact. History rows get a
//! surrogate key `(w_id, sequence)`. Warehouse and district are drawn per transaction (no
//! terminal binding). Remote lines and remote payments need more than one warehouse. The
//! rolled-back New-Order's unused item id is `items + 1` in its last line. Dates are seconds
//! since the epoch. [`tpcc::TpccScale`] smaller than `FULL` exists for fast tests only.
//!
//! **LinkBench** ([`linkbench`]). Out-degrees come from the embedded `Distribution.dat` table,
//! assigned by popularity rank (stratified quantiles, so the hottest ids have the most links)
//! and scattered over ids by a keyed permutation, instead of LinkBench's per-id generator; a
//! small graph cannot hold the table's extreme tail, so its mean degree is below 4.1. A node's
//! links point to `id1 + k·stride mod n` (distinct targets) and alternate between the two link
//! types. Request skew is zipf over the loaded nodes' ranks (θ 0.8 / 0.741 / 0.625 / 0.606,
//! node deletes uniform); nodes added during the run are not chosen by the skewed requests.
//! deletelink/updatelink/getlink pick one of id1's loaded links (a miss when it was deleted);
//! addlink picks a uniform id2 and revives a hidden link. Node payloads are capped at 8 KiB
//! (LinkBench has no cap). Link times are microseconds, strictly increasing within a run.
//! Per-op lines print exact percentiles rather than LinkBench's histogram buckets.

#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod codec;
pub mod dbbench;
pub mod dist;
pub mod driver;
pub mod error;
pub mod linkbench;
pub mod report;
pub mod store;
pub mod tpcc;
pub mod ycsb;

pub use driver::{DriverConfig, LoadReport, Progress, ProgressFn, RunLimit, Submitted};
pub use error::{ConfigError, WorkloadError};
pub use report::{
    render_linkbench, render_load, render_text, render_tpcc, render_ycsb, LatencySummary, OpReport,
    RunReport,
};
pub use store::{
    MemStore, OpenTables, PendingCommit, Resolved, Store, StoreError, StoreTxn, TableId, BULK_BATCH,
};

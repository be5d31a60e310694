//! LinkBench: a social-graph store of nodes and typed links with per-(id1, type) counts.
//!
//! Tables (keys big-endian):
//! - `lb_node`: `id` → type, version, time, data.
//! - `lb_link`: `(id1, link_type, id2)` → visibility, version, time, data.
//! - `lb_link_time`: `(id1, link_type, time, id2)` → version, data — a covering index of the
//!   *visible* links, so `getlinklist` is one reverse range scan (newest first).
//! - `lb_count`: `(id1, link_type)` → count of visible links, version, time.
//!
//! Deleting a link hides it (visibility 0) and removes it from the time index; adding it again
//! makes it visible. Times are microseconds since the epoch, made strictly increasing per run.

mod degree_table;
pub mod graph;
pub mod mix;
mod requests;
pub mod schema;

use std::sync::atomic::AtomicU64;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::codec::Dec;
use crate::dist::Zipfian;
use crate::driver::{self, DriverConfig, Finish, LoadReport, ProgressFn, TxnRunner};
use crate::error::{ConfigError, WorkloadError};
use crate::report::RunReport;
use crate::store::{prefix_end, Store, StoreError};
use graph::Graph;
pub use mix::{LinkMix, DWB_FTL_REQUESTS};
use schema::*;

/// Node table.
pub const NODE: &str = "lb_node";
/// Link table.
pub const LINK: &str = "lb_link";
/// Visible links by time.
pub const LINK_TIME: &str = "lb_link_time";
/// Link counts.
pub const COUNT: &str = "lb_count";

/// Operation names in report order (LinkBench's names), matching [`mix::REQUESTS`].
pub const OP_NAMES: [&str; 10] = [
    "ADD_LINK",
    "DELETE_LINK",
    "UPDATE_LINK",
    "COUNT_LINK",
    "MULTIGET_LINK",
    "GET_LINKS_LIST",
    "GET_NODE",
    "ADD_NODE",
    "UPDATE_NODE",
    "DELETE_NODE",
];

/// Zipf exponents of LinkBench's default access distributions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Skew {
    /// Link reads (countlink, getlink, getlinklist): 0.8.
    pub link_read: f64,
    /// Link writes (addlink, deletelink, updatelink): 0.741.
    pub link_write: f64,
    /// Node reads: 0.625.
    pub node_read: f64,
    /// Node updates: 0.606. Node deletes are uniform.
    pub node_update: f64,
}

impl Default for Skew {
    fn default() -> Self {
        Skew {
            link_read: 0.8,
            link_write: 0.741,
            node_read: 0.625,
            node_update: 0.606,
        }
    }
}

/// LinkBench parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkbenchConfig {
    /// Nodes loaded (`--nodes`, default 10,000,000).
    pub nodes: u64,
    /// Request mix (`--mix`).
    pub mix: LinkMix,
    /// Access skew.
    pub skew: Skew,
    /// Link types (2).
    pub link_types: u32,
    /// `getlinklist` limit (10,000).
    pub max_link_list: usize,
    /// Median link payload (8 B), σ 1.0, at most 254 B.
    pub link_data_median: f64,
    /// Largest link payload.
    pub link_data_max: usize,
    /// Median node payload (128 B), σ 1.0.
    pub node_data_median: f64,
    /// Largest node payload (not in LinkBench; keeps a value well under a page).
    pub node_data_max: usize,
    /// σ of the log-normal payload sizes.
    pub data_sigma: f64,
    /// Nodes per load unit (one transaction per unit's nodes, links and counts).
    pub load_nodes_per_txn: u64,
    /// Most rows in one load transaction; a hot node's ~10^6 links are split (10,000).
    pub load_max_rows_per_txn: usize,
}

impl LinkbenchConfig {
    /// LinkBench's defaults with `nodes` nodes and the given mix.
    pub fn new(nodes: u64, mix: LinkMix) -> Self {
        LinkbenchConfig {
            nodes,
            mix,
            skew: Skew::default(),
            link_types: 2,
            max_link_list: 10_000,
            link_data_median: 8.0,
            link_data_max: 254,
            node_data_median: 128.0,
            node_data_max: 8192,
            data_sigma: 1.0,
            load_nodes_per_txn: 100,
            load_max_rows_per_txn: 10_000,
        }
    }

    /// Rejects parameters that cannot run, before any work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.nodes < 2 {
            return Err(ConfigError::OutOfRange {
                what: "--nodes",
                value: self.nodes.to_string(),
                fix: "load at least 2 nodes (LinkBench's default is 10000000)".to_string(),
            });
        }
        if self.nodes > 1 << 40 {
            return Err(ConfigError::OutOfRange {
                what: "--nodes",
                value: self.nodes.to_string(),
                fix: "use at most 2^40 nodes".to_string(),
            });
        }
        self.mix.validate()?;
        if self.link_types == 0 {
            return Err(ConfigError::Zero {
                what: "link types",
                fix: "use at least 1 link type (LinkBench uses 2)",
            });
        }
        if self.max_link_list == 0
            || self.load_nodes_per_txn == 0
            || self.load_max_rows_per_txn == 0
        {
            return Err(ConfigError::Zero {
                what: "getlinklist limit or load batch",
                fix: "use positive values (10000 and 100 by default)",
            });
        }
        if self.link_data_max == 0 || self.node_data_max == 0 || self.link_data_max > 65_535 {
            return Err(ConfigError::OutOfRange {
                what: "payload maximum",
                value: format!("link {} / node {}", self.link_data_max, self.node_data_max),
                fix: "use 1..=65535 bytes for links and at least 1 for nodes".to_string(),
            });
        }
        for (what, v) in [
            ("link read skew", self.skew.link_read),
            ("link write skew", self.skew.link_write),
            ("node read skew", self.skew.node_read),
            ("node update skew", self.skew.node_update),
        ] {
            if !(v > 0.0 && v < 1.0) {
                return Err(ConfigError::OutOfRange {
                    what,
                    value: v.to_string(),
                    fix: "use a zipf exponent in (0, 1)".to_string(),
                });
            }
        }
        Ok(())
    }
}

// ---- load ----

/// Creates the four tables.
pub fn create_tables(store: &dyn Store) -> Result<(), WorkloadError> {
    driver::create_tables(store, &[NODE, LINK, LINK_TIME, COUNT])
}

/// Loads `cfg.nodes` nodes with their links and counts, `threads` loader threads.
pub fn load(
    store: &dyn Store,
    cfg: &LinkbenchConfig,
    threads: usize,
    seed: u64,
    progress: Option<ProgressFn<'_>>,
) -> Result<LoadReport, WorkloadError> {
    cfg.validate()?;
    driver::validate_threads(threads)?;
    create_tables(store)?;
    let graph = Graph::new(cfg.nodes);
    let clock = Clock::new();
    let per = cfg.load_nodes_per_txn;
    let units = cfg.nodes.div_ceil(per);
    let unit = |u: u64, txns: &mut TxnRunner| -> Result<u64, WorkloadError> {
        let mut rng = SmallRng::seed_from_u64(driver::thread_seed(seed, u as usize));
        let first = u * per + 1;
        let last = (first + per - 1).min(cfg.nodes);
        let mut rows: Vec<(&'static str, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut written = 0u64;
        // A hot node has up to ~10^6 links; cap the rows per transaction.
        let mut flush = |rows: &mut Vec<(&'static str, Vec<u8>, Vec<u8>)>,
                         txns: &mut TxnRunner|
         -> Result<(), WorkloadError> {
            txns.run(store, false, |t| {
                for (table, k, v) in rows.iter() {
                    // Rows of three tables: each opens once (open returns the same handle).
                    let table_t = t.open(table)?;
                    t.put(table_t, k, v)?;
                }
                Ok(Finish::Commit(()))
            })
            .map_err(|e| WorkloadError::store(format!("loading nodes {first}..={last}"), e))?;
            written += rows.len() as u64;
            rows.clear();
            Ok(())
        };
        for id1 in first..=last {
            let time = clock.tick();
            let node = Node {
                node_type: 1,
                version: 0,
                time,
                data: payload(
                    &mut rng,
                    cfg.node_data_median,
                    cfg.data_sigma,
                    cfg.node_data_max,
                ),
            };
            rows.push((NODE, node_key(id1), node.encode()));
            let mut counts = vec![0u64; cfg.link_types as usize];
            for j in 0..graph.degree(id1) {
                let (t, id2) = graph.link(id1, j, cfg.link_types);
                let link = Link {
                    visibility: 1,
                    version: 0,
                    time: clock.tick(),
                    data: payload(
                        &mut rng,
                        cfg.link_data_median,
                        cfg.data_sigma,
                        cfg.link_data_max,
                    ),
                };
                rows.push((
                    LINK_TIME,
                    link_time_key(id1, t, link.time, id2),
                    link.index_value(),
                ));
                rows.push((LINK, link_key(id1, t, id2), link.encode()));
                counts[(t - 1) as usize] += 1;
                if rows.len() >= cfg.load_max_rows_per_txn {
                    flush(&mut rows, txns)?;
                }
            }
            for (i, &c) in counts.iter().enumerate() {
                if c > 0 {
                    rows.push((
                        COUNT,
                        count_key(id1, i as u32 + 1),
                        encode_count(c, 0, time),
                    ));
                }
            }
        }
        flush(&mut rows, txns)?;
        Ok(written)
    };
    driver::load_parallel("linkbench", threads, units, progress, &unit, 100)
}

// ---- requests ----

/// Runs the request phase and reports it (`command` = `bench linkbench`).
pub fn run(
    store: &dyn Store,
    cfg: &LinkbenchConfig,
    driver_cfg: &DriverConfig,
    progress: Option<ProgressFn<'_>>,
) -> Result<RunReport, WorkloadError> {
    cfg.validate()?;
    driver_cfg.validate()?;
    let next_node = {
        let err = |e| WorkloadError::store("finding the highest node id", e);
        let mut t = store.begin_read().map_err(err)?;
        let node_t = t.open(NODE).map_err(err)?;
        let last = t.scan(node_t, &[], None, 1, true).map_err(err)?;
        let _ = t.commit();
        let max = match last.first() {
            Some((k, _)) => k
                .as_slice()
                .try_into()
                .map(u64::from_be_bytes)
                .map_err(|_| WorkloadError::Corrupt {
                    table: NODE,
                    detail: "node key is not 8 bytes".to_string(),
                })?,
            None => {
                return Err(WorkloadError::NotLoaded {
                    what: format!("table {NODE} is empty"),
                })
            }
        };
        max.max(cfg.nodes) + 1
    };
    let n = cfg.nodes;
    let mut cumulative = [0.0; 10];
    let mut acc = 0.0;
    for (c, p) in cumulative.iter_mut().zip(cfg.mix.percent) {
        acc += p;
        *c = acc;
    }
    let workload = requests::LinkRun {
        cfg,
        graph: Graph::new(n),
        cumulative,
        last_op: cfg.mix.percent.iter().rposition(|&p| p > 0.0).unwrap_or(0),
        link_read: Zipfian::new(n, cfg.skew.link_read),
        link_write: Zipfian::new(n, cfg.skew.link_write),
        node_read: Zipfian::new(n, cfg.skew.node_read),
        node_update: Zipfian::new(n, cfg.skew.node_update),
        next_node: AtomicU64::new(next_node),
        clock: Clock::new(),
    };
    let m = driver::run(store, &workload, driver_cfg, progress)?;
    let config = serde_json::json!({
        "linkbench": cfg,
        "driver": driver_cfg,
        "store": store.describe(),
    });
    Ok(RunReport::new("bench linkbench", config, &m, store))
}

/// Returns the visible links of `(id1, link_type)`, newest first, at most `limit` — what
/// `getlinklist` reads — as `(id2, time, data)`.
pub fn get_link_list(
    store: &dyn Store,
    id1: u64,
    link_type: u32,
    limit: usize,
) -> Result<Vec<(u64, u64, Vec<u8>)>, StoreError> {
    let mut t = store.begin_read()?;
    let link_time_t = t.open(LINK_TIME)?;
    let p = count_key(id1, link_type);
    let rows = t.scan(link_time_t, &p, prefix_end(&p).as_deref(), limit, true)?;
    t.commit()?;
    rows.into_iter()
        .map(|(k, v)| {
            let part = |r: std::ops::Range<usize>| {
                k.get(r)
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map(u64::from_be_bytes)
                    .ok_or_else(|| StoreError::Other("corrupt link time index key".to_string()))
            };
            let mut d = Dec::new(&v, LINK_TIME);
            let _version = d.u64()?;
            Ok((part(20..28)?, part(12..20)?, d.bytes16()?))
        })
        .collect()
}

/// The stored count of `(id1, link_type)` (0 when absent).
pub fn link_count(store: &dyn Store, id1: u64, link_type: u32) -> Result<u64, StoreError> {
    let mut t = store.begin_read()?;
    let count_t = t.open(COUNT)?;
    let v = t.get(count_t, &count_key(id1, link_type))?;
    t.commit()?;
    v.map_or(Ok(0), |v| decode_count(&v).map(|c| c.0))
}

#[cfg(test)]
mod tests;

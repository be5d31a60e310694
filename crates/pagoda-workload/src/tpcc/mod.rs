//! TPC-C as tpcc-mysql runs it, with its bugs fixed: nine tables and two secondary indexes on
//! a [`Store`], the parallel loader, the five transactions in the 45/43/4/4/4 mix (a weighted
//! draw per transaction, not tpcc-mysql's 23-card deck), no keying or think time, tpmC, and
//! the consistency check of clause 3.3.2 conditions 1–4.

pub mod check;
pub mod load;
pub mod random;
pub mod schema;
pub mod txn;

use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::driver::{
    self, DriverConfig, LoadReport, OpStatus, ProgressFn, TxnRunner, Worker, Workload,
};
use crate::error::{ConfigError, WorkloadError};
use crate::report::RunReport;
use crate::store::{prefix_end, Store, StoreError};
pub use check::{check, CheckReport, Violation};
use random::CConstants;
use schema::*;

/// Districts per warehouse.
pub const DISTRICTS: u32 = 10;

/// Database size per warehouse. [`TpccScale::FULL`] is the specification's; smaller scales
/// exist only so tests of the transaction logic stay fast, and are not TPC-C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TpccScale {
    /// Rows of `item` (and of `stock` per warehouse): 100,000.
    pub items: u32,
    /// Customers (and loaded orders) per district: 3,000. The last 30 % of the orders are
    /// undelivered and have a new-order row (o_id 2101..3000).
    pub customers_per_district: u32,
}

impl TpccScale {
    /// The specification's sizes.
    pub const FULL: TpccScale = TpccScale {
        items: 100_000,
        customers_per_district: 3_000,
    };

    /// First undelivered order id of a district (2101 at full scale).
    pub fn first_new_order(&self) -> u32 {
        self.customers_per_district - self.customers_per_district * 3 / 10 + 1
    }
}

/// TPC-C parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TpccConfig {
    /// Warehouses (`--warehouses`).
    pub warehouses: u32,
    /// Sizes per warehouse; [`TpccScale::FULL`] unless testing.
    pub scale: TpccScale,
    /// Rows per load transaction.
    pub load_batch: usize,
}

impl TpccConfig {
    /// A full-scale database of `warehouses` warehouses.
    pub fn new(warehouses: u32) -> Self {
        TpccConfig {
            warehouses,
            scale: TpccScale::FULL,
            load_batch: 1000,
        }
    }

    /// Rejects parameters that cannot run, before any work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.warehouses == 0 {
            return Err(ConfigError::Zero {
                what: "--warehouses",
                fix: "use at least 1 warehouse",
            });
        }
        if self.warehouses > 100_000 {
            return Err(ConfigError::OutOfRange {
                what: "--warehouses",
                value: self.warehouses.to_string(),
                fix: "use 1..=100000 warehouses (each is ~100 MB)".to_string(),
            });
        }
        if self.scale.items < 1 || self.scale.items > 100_000 {
            return Err(ConfigError::OutOfRange {
                what: "items",
                value: self.scale.items.to_string(),
                fix: "use 1..=100000 items (100000 is TPC-C)".to_string(),
            });
        }
        if self.scale.customers_per_district < 10 || self.scale.customers_per_district > 3000 {
            return Err(ConfigError::OutOfRange {
                what: "customers per district",
                value: self.scale.customers_per_district.to_string(),
                fix: "use 10..=3000 customers per district (3000 is TPC-C)".to_string(),
            });
        }
        if self.load_batch == 0 {
            return Err(ConfigError::Zero {
                what: "load batch",
                fix: "load at least 1 row per transaction",
            });
        }
        Ok(())
    }

    /// Rows a full load writes per warehouse, by table (order lines vary; not included).
    pub fn expected_rows_per_warehouse(&self) -> [(&'static str, u64); 8] {
        let c = u64::from(self.scale.customers_per_district) * u64::from(DISTRICTS);
        let undelivered =
            u64::from(self.scale.customers_per_district + 1 - self.scale.first_new_order())
                * u64::from(DISTRICTS);
        [
            (WAREHOUSE, 1),
            (DISTRICT, u64::from(DISTRICTS)),
            (CUSTOMER, c),
            (HISTORY, c),
            (ORDERS, c),
            (NEW_ORDERS, undelivered),
            (STOCK, u64::from(self.scale.items)),
            (CUSTOMER_BY_NAME, c),
        ]
    }
}

/// Operation names in report order (tpcc-mysql's order).
pub const OP_NAMES: [&str; 5] = [
    "NewOrder",
    "Payment",
    "OrderStatus",
    "Delivery",
    "StockLevel",
];

/// The mix in percent, in [`OP_NAMES`] order.
pub const MIX_PERCENT: [u32; 5] = [45, 43, 4, 4, 4];

/// Creates the eleven tables.
pub fn create_tables(store: &dyn Store) -> Result<(), WorkloadError> {
    driver::create_tables(store, &TABLES)
}

/// Loads a database with `threads` loader threads.
pub fn load(
    store: &dyn Store,
    cfg: &TpccConfig,
    threads: usize,
    seed: u64,
    progress: Option<ProgressFn<'_>>,
) -> Result<LoadReport, WorkloadError> {
    cfg.validate()?;
    driver::validate_threads(threads)?;
    create_tables(store)?;
    let units = load::units(cfg);
    let unit = |i: u64, txns: &mut TxnRunner| -> Result<u64, WorkloadError> {
        let u = units[i as usize];
        load::load_unit(store, cfg, seed, i, u, txns)
    };
    driver::load_parallel("tpcc", threads, units.len() as u64, progress, &unit, 100)
}

/// Runs the measured phase (`driver_cfg.warmup` is the ramp-up) and reports it with tpmC.
pub fn run(
    store: &dyn Store,
    cfg: &TpccConfig,
    driver_cfg: &DriverConfig,
    progress: Option<ProgressFn<'_>>,
) -> Result<RunReport, WorkloadError> {
    cfg.validate()?;
    driver_cfg.validate()?;
    preflight(store, cfg)?;
    let history_base = next_history_seq(store, cfg.warehouses)?;
    let workload = TpccRun {
        cfg,
        inputs: txn::Inputs {
            warehouses: cfg.warehouses,
            items: cfg.scale.items,
            customers: cfg.scale.customers_per_district,
            c: CConstants::from_seed(driver_cfg.seed),
        },
        history_seq: AtomicU64::new(history_base),
    };
    let m = driver::run(store, &workload, driver_cfg, progress)?;
    let config = serde_json::json!({
        "tpcc": cfg,
        "driver": driver_cfg,
        "mix_percent": MIX_PERCENT,
        "c_constants": workload.inputs.c,
        "store": store.describe(),
    });
    let mut report = RunReport::new("bench tpcc", config, &m, store);
    let new_orders = m.op("NewOrder").map_or(0, |o| o.count);
    let minutes = m.duration.as_secs_f64() / 60.0;
    report.tpmc = Some(if minutes > 0.0 {
        new_orders as f64 / minutes
    } else {
        0.0
    });
    Ok(report)
}

/// Fails unless the last warehouse and the last item are there.
fn preflight(store: &dyn Store, cfg: &TpccConfig) -> Result<(), WorkloadError> {
    let err = |e| WorkloadError::store("checking the TPC-C tables", e);
    let mut t = store.begin_read().map_err(err)?;
    let (warehouse_t, item_t) = (t.open(WAREHOUSE).map_err(err)?, t.open(ITEM).map_err(err)?);
    let w = t
        .get(warehouse_t, &warehouse_key(cfg.warehouses))
        .map_err(err)?;
    let i = t.get(item_t, &item_key(cfg.scale.items)).map_err(err)?;
    let _ = t.commit();
    if w.is_none() || i.is_none() {
        return Err(WorkloadError::NotLoaded {
            what: format!(
                "the database has no warehouse {} or no item {}",
                cfg.warehouses, cfg.scale.items
            ),
        });
    }
    Ok(())
}

/// The first free history surrogate: above every existing one, so repeated runs on one
/// database never overwrite history rows.
fn next_history_seq(store: &dyn Store, warehouses: u32) -> Result<u64, WorkloadError> {
    let mut next = load::RUN_HISTORY_BASE;
    let mut t = store
        .begin_read()
        .map_err(|e| WorkloadError::store("reading history", e))?;
    let history_t = t
        .open(HISTORY)
        .map_err(|e| WorkloadError::store("reading history", e))?;
    for w in 1..=warehouses {
        let p = warehouse_key(w);
        let last = t
            .scan(history_t, &p, prefix_end(&p).as_deref(), 1, true)
            .map_err(|e| WorkloadError::store("reading history", e))?;
        if let Some((k, _)) = last.first() {
            if let Some(b) = k.get(4..12).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                next = next.max(u64::from_be_bytes(b) + 1);
            }
        }
    }
    let _ = t.commit();
    Ok(next)
}

struct TpccRun<'a> {
    cfg: &'a TpccConfig,
    inputs: txn::Inputs,
    history_seq: AtomicU64,
}

impl Workload for TpccRun<'_> {
    fn op_names(&self) -> Vec<&'static str> {
        OP_NAMES.to_vec()
    }

    fn worker(&self, _thread: usize, seed: u64) -> Box<dyn Worker + '_> {
        Box::new(TpccWorker {
            run: self,
            rng: SmallRng::seed_from_u64(seed),
        })
    }
}

struct TpccWorker<'a> {
    run: &'a TpccRun<'a>,
    rng: SmallRng,
}

impl Worker for TpccWorker<'_> {
    fn step(
        &mut self,
        store: &dyn Store,
        txns: &mut TxnRunner,
    ) -> (usize, Result<OpStatus, StoreError>) {
        let inputs = &self.run.inputs;
        let rng = &mut self.rng;
        let w = rng.gen_range(1..=self.run.cfg.warehouses);
        let mut pick = rng.gen_range(0..100);
        let op = MIX_PERCENT
            .iter()
            .position(|&p| {
                if pick < p {
                    true
                } else {
                    pick -= p;
                    false
                }
            })
            .unwrap_or(0);
        let now = load::now();
        let r = match op {
            0 => txn::new_order(store, txns, &inputs.new_order(rng, w), now),
            1 => {
                let i = inputs.payment(rng, w);
                let seq = self.run.history_seq.fetch_add(1, Ordering::Relaxed);
                txn::payment(store, txns, &i, seq, now)
            }
            2 => {
                let (d, c) = inputs.order_status(rng);
                txn::order_status(store, txns, w, d, &c)
            }
            3 => txn::delivery(store, txns, w, inputs.delivery(rng), now),
            _ => {
                let (d, threshold) = inputs.stock_level(rng);
                txn::stock_level(store, txns, w, d, threshold)
            }
        };
        (op, r)
    }
}

#[cfg(test)]
mod tests;

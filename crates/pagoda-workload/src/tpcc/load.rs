//! The parallel TPC-C loader (clause 4.3.3 row counts and values).
//!
//! Work is cut into independent units — item ranges, per-warehouse header rows, stock ranges
//! and whole districts (customers, history, orders, order lines, new-orders and both indexes)
//! — that loader threads pull from a shared counter. Each unit draws from its own generator
//! seeded from (seed, unit), so the database does not depend on the thread count.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::random::{astring, data_with_original, last_name, nstring, nurand, zip, CConstants};
use super::schema::*;
use super::TpccConfig;
use crate::driver::{thread_seed, Finish, TxnRunner};
use crate::error::WorkloadError;
use crate::store::Store;

/// Rows per unit of the item and stock loaders.
const CHUNK: u32 = 10000;

/// A unit of load work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Items `first..=last`.
    Items(u32, u32),
    /// Warehouse `w` and its 10 districts.
    Warehouse(u32),
    /// Stock of warehouse `w` for items `first..=last`.
    Stock(u32, u32, u32),
    /// District `d` of warehouse `w` with its customers, history, orders and lines.
    District(u32, u32),
}

/// All units of a load, in order.
pub fn units(cfg: &TpccConfig) -> Vec<Unit> {
    let items = cfg.scale.items;
    let chunks = |f: &mut dyn FnMut(u32, u32)| {
        let mut first = 1;
        while first <= items {
            let last = (first + CHUNK - 1).min(items);
            f(first, last);
            first = last + 1;
        }
    };
    let mut u = Vec::new();
    chunks(&mut |a, b| u.push(Unit::Items(a, b)));
    for w in 1..=cfg.warehouses {
        u.push(Unit::Warehouse(w));
        chunks(&mut |a, b| u.push(Unit::Stock(w, a, b)));
        for d in 1..=super::DISTRICTS {
            u.push(Unit::District(w, d));
        }
    }
    u
}

/// Buffers rows and writes them in transactions of `batch` rows.
struct Writer<'a> {
    store: &'a dyn Store,
    txns: &'a mut TxnRunner,
    batch: usize,
    rows: Vec<(&'static str, Vec<u8>, Vec<u8>)>,
    written: u64,
}

impl Writer<'_> {
    fn put(
        &mut self,
        table: &'static str,
        key: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<(), WorkloadError> {
        self.rows.push((table, key, value));
        if self.rows.len() >= self.batch {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), WorkloadError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = &self.rows;
        self.txns
            .run(self.store, false, |t| {
                for (table, k, v) in rows {
                    // Rows of several tables: each opens once (open returns the same handle).
                    let table_t = t.open(table)?;
                    t.put(table_t, k, v)?;
                }
                Ok(Finish::Commit(()))
            })
            .map_err(|e| WorkloadError::store("loading TPC-C", e))?;
        self.written += self.rows.len() as u64;
        self.rows.clear();
        Ok(())
    }
}

fn address(rng: &mut SmallRng) -> Address {
    Address {
        street_1: astring(rng, 10, 20),
        street_2: astring(rng, 10, 20),
        city: astring(rng, 10, 20),
        state: astring(rng, 2, 2),
        zip: zip(rng),
    }
}

/// Seconds since the epoch, for the date columns.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Loads one unit and returns the rows written.
pub fn load_unit(
    store: &dyn Store,
    cfg: &TpccConfig,
    seed: u64,
    index: u64,
    unit: Unit,
    txns: &mut TxnRunner,
) -> Result<u64, WorkloadError> {
    let mut rng = SmallRng::seed_from_u64(thread_seed(seed, index as usize));
    let mut w = Writer {
        store,
        txns,
        batch: cfg.load_batch,
        rows: Vec::new(),
        written: 0,
    };
    match unit {
        Unit::Items(first, last) => {
            for i in first..=last {
                let item = Item {
                    im_id: rng.gen_range(1..=10_000),
                    name: astring(&mut rng, 14, 24),
                    price: rng.gen_range(100..=10_000),
                    data: data_with_original(&mut rng),
                };
                w.put(ITEM, item_key(i), item.encode())?;
            }
        }
        Unit::Warehouse(wid) => {
            let wh = Warehouse {
                name: astring(&mut rng, 6, 10),
                address: address(&mut rng),
                tax: rng.gen_range(0..=2000),
                ytd: 300_000 * 100,
            };
            w.put(WAREHOUSE, warehouse_key(wid), wh.encode())?;
            for d in 1..=super::DISTRICTS {
                let dist = District {
                    name: astring(&mut rng, 6, 10),
                    address: address(&mut rng),
                    tax: rng.gen_range(0..=2000),
                    ytd: 30_000 * 100,
                    next_o_id: cfg.scale.customers_per_district + 1,
                };
                w.put(DISTRICT, district_key(wid, d), dist.encode())?;
            }
        }
        Unit::Stock(wid, first, last) => {
            for i in first..=last {
                let s = Stock {
                    quantity: rng.gen_range(10..=100),
                    dist: std::array::from_fn(|_| astring(&mut rng, 24, 24)),
                    ytd: 0,
                    order_cnt: 0,
                    remote_cnt: 0,
                    data: data_with_original(&mut rng),
                };
                w.put(STOCK, stock_key(wid, i), s.encode())?;
            }
        }
        Unit::District(wid, d) => load_district(&mut w, &mut rng, cfg, seed, wid, d)?,
    }
    w.flush()?;
    Ok(w.written)
}

fn load_district(
    w: &mut Writer<'_>,
    rng: &mut SmallRng,
    cfg: &TpccConfig,
    seed: u64,
    wid: u32,
    d: u32,
) -> Result<(), WorkloadError> {
    let now = now();
    load_customers(w, rng, cfg, seed, (wid, d), now)?;
    load_orders(w, rng, cfg, (wid, d), now)
}

/// District `d` of warehouse `wid`'s customers, each with its name index entry and one
/// history row.
fn load_customers(
    w: &mut Writer<'_>,
    rng: &mut SmallRng,
    cfg: &TpccConfig,
    seed: u64,
    (wid, d): (u32, u32),
    now: i64,
) -> Result<(), WorkloadError> {
    let customers = cfg.scale.customers_per_district;
    let c_load = CConstants::from_seed(seed).c_last_load;
    for c in 1..=customers {
        let last = if c <= 1000 {
            last_name(c - 1)
        } else {
            last_name(nurand(rng, super::random::A_C_LAST, 0, 999, c_load))
        };
        let cust = Customer {
            first: astring(rng, 8, 16),
            middle: "OE".to_string(),
            last,
            address: address(rng),
            phone: nstring(rng, 16, 16),
            since: now,
            credit: if rng.gen_range(0..10) == 0 {
                "BC"
            } else {
                "GC"
            }
            .to_string(),
            credit_lim: 50_000 * 100,
            discount: rng.gen_range(0..=5000),
            balance: -1000,    // -10.00
            ytd_payment: 1000, // 10.00
            payment_cnt: 1,
            delivery_cnt: 0,
            data: astring(rng, 300, 500),
        };
        w.put(
            CUSTOMER_BY_NAME,
            customer_name_key(wid, d, &cust.last, &cust.first, c),
            Vec::new(),
        )?;
        w.put(CUSTOMER, customer_key(wid, d, c), cust.encode())?;
        let h = History {
            c_id: c,
            c_d_id: d,
            c_w_id: wid,
            d_id: d,
            w_id: wid,
            date: now,
            amount: 1000, // 10.00
            data: astring(rng, 12, 24),
        };
        w.put(
            HISTORY,
            history_key(wid, load_history_seq(d, c)),
            h.encode(),
        )?;
    }
    Ok(())
}

/// District `d` of warehouse `wid`'s orders: one per customer, customers in a random
/// permutation, with their lines; the newest are new orders, not yet delivered.
fn load_orders(
    w: &mut Writer<'_>,
    rng: &mut SmallRng,
    cfg: &TpccConfig,
    (wid, d): (u32, u32),
    now: i64,
) -> Result<(), WorkloadError> {
    let customers = cfg.scale.customers_per_district;
    let mut perm: Vec<u32> = (1..=customers).collect();
    perm.shuffle(rng);
    let first_new = cfg.scale.first_new_order();
    for (o, &c) in (1..=customers).zip(&perm) {
        let delivered = o < first_new;
        let ol_cnt = rng.gen_range(5..=15);
        let order = Order {
            c_id: c,
            entry_d: now,
            carrier_id: delivered.then(|| rng.gen_range(1..=10)),
            ol_cnt,
            all_local: 1,
        };
        w.put(ORDERS, order_key(wid, d, o), order.encode())?;
        w.put(
            ORDERS_BY_CUSTOMER,
            order_by_customer_key(wid, d, c, o),
            Vec::new(),
        )?;
        for n in 1..=ol_cnt {
            let line = OrderLine {
                i_id: rng.gen_range(1..=cfg.scale.items),
                supply_w_id: wid,
                delivery_d: delivered.then_some(now),
                quantity: 5,
                amount: if delivered {
                    0
                } else {
                    rng.gen_range(1..=999_999)
                },
                dist_info: astring(rng, 24, 24),
            };
            w.put(ORDER_LINE, order_line_key(wid, d, o, n), line.encode())?;
        }
        if !delivered {
            w.put(NEW_ORDERS, order_key(wid, d, o), Vec::new())?;
        }
    }
    Ok(())
}

/// History surrogate keys of loaded rows: unique per warehouse and below
/// [`RUN_HISTORY_BASE`], where the run's keys start.
fn load_history_seq(d: u32, c: u32) -> u64 {
    (u64::from(d) << 32) | u64::from(c)
}

/// First history surrogate of the run phase.
pub const RUN_HISTORY_BASE: u64 = 1 << 48;

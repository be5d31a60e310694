//! TPC-C on the engine on emulated SSDs: power is cut on both devices while the driver's
//! threads are committing; after crash recovery the consistency conditions 1–4 hold, every
//! New-Order and Payment the driver saw commit is there, and the database keeps working.
#![allow(clippy::unwrap_used)] // test: a failure should panic with the cause

use pagoda_device::fault::{FaultDevice, Rail};
use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions};
use pagoda_peers::PagodaStore;
use pagoda_workload::report::RunReport;
use pagoda_workload::tpcc::schema::{HISTORY, ORDERS};
use pagoda_workload::tpcc::{self, TpccConfig, TpccScale};
use pagoda_workload::{DriverConfig, RunLimit, Store};
use std::sync::Arc;
use std::time::Duration;

fn open(data: &DeviceRef, log: &DeviceRef) -> PagodaStore {
    let opts = DbOptions::with_devices(data.clone(), log.clone())
        .buffer_bytes(8 << 20)
        // No background thread: after the "crash" nothing may touch the devices.
        .background(false);
    PagodaStore::new(Db::open(opts).unwrap(), "test".into())
}

fn rows(store: &PagodaStore, table: &str) -> u64 {
    let tx = store.db().begin_read().unwrap();
    let mut n = 0;
    for r in tx.open_table(table).unwrap().range(..) {
        r.unwrap();
        n += 1;
    }
    n
}

/// (ok, errors) of operation `name`.
fn op(report: &RunReport, name: &str) -> (u64, u64) {
    let o = report.op(name).unwrap();
    (o.ok, o.errors)
}

#[test]
fn tpcc_is_consistent_after_a_power_cut_under_load() {
    let seed = std::env::var("PAGODA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(11u64);
    let spec = DeviceSpec::parse("sata-ssd,capacity=1GiB").unwrap();
    let (data, log) = (spec.open().unwrap(), spec.open().unwrap());
    // Data and log lose power together: the n-th write or flush over both cuts both.
    let rail = Rail::new(seed);
    let cut = |inner: &DeviceRef| -> DeviceRef {
        Arc::new(FaultDevice::on_rail(inner.clone(), &rail).unwrap())
    };
    let cfg = TpccConfig {
        scale: TpccScale {
            items: 2_000,
            customers_per_district: 60,
        },
        ..TpccConfig::new(2)
    };
    let store = open(&cut(&data), &cut(&log));
    tpcc::load(&store, &cfg, 2, 7, None).unwrap();
    let check = tpcc::check(&store, 2).unwrap();
    assert!(check.is_consistent(), "{}", check.render());
    let (orders_loaded, history_loaded) = (rows(&store, ORDERS), rows(&store, HISTORY));
    // Recovery will start from this checkpoint: the loaded rows must be in the pages by then.
    store.db().checkpoint().unwrap();

    // The cut falls at a seeded write or flush of the run: after the first commits (each does
    // a log write and a sync) and well before its end (600 operations do about 1,400).
    let n = 100 + pagoda_workload::driver::thread_seed(seed, 0) % 700;
    rail.arm(n);

    let driver = DriverConfig {
        threads: 2,
        limit: RunLimit::Ops(600),
        seed: 7,
        warmup: Duration::ZERO,
        ..DriverConfig::default()
    };
    // After the cut the versions of the commits that failed stay pending, so every later
    // writer of their rows gets a (retryable) conflict until the database is reopened: few
    // retries keep the failing rest of the run short.
    let cut_run = DriverConfig {
        max_retries: 8,
        ..driver.clone()
    };
    let report = tpcc::run(&store, &cfg, &cut_run, None).unwrap();
    let ctx = format!("seed {seed}, cut at I/O {n}");
    assert!(rail.is_off(), "{ctx}: the run ended before the cut");
    let acknowledged = store.db().stats().commits;
    let (new_orders, new_order_errors) = op(&report, "NewOrder");
    let (payments, payment_errors) = op(&report, "Payment");
    // The cut fell mid-run: commits were acknowledged before it, and the operations after it
    // failed (with the device's error, or the failed database's).
    assert!(
        acknowledged > 0 && new_orders > 0 && payments > 0,
        "{ctx}: {acknowledged} commits, {new_orders} New-Orders, {payments} Payments"
    );
    assert!(
        report.errors > 0 && new_order_errors > 0,
        "{ctx}: nothing failed after the cut"
    );
    // The engine failed because of the cut (and refuses writes since).
    let failure = store
        .db()
        .failure()
        .map(|f| f.to_string())
        .unwrap_or_default();
    assert!(failure.contains("no power"), "{ctx}: {failure:?}");

    // Crash: the engine is abandoned without a checkpoint (it can no longer reach the devices
    // anyway) and the devices, powered again, are opened directly: recovery.
    store.abandon();
    let store = open(&data, &log);
    let rec = store.db().stats().recovery;
    let check = tpcc::check(&store, 2).unwrap();
    assert!(
        check.is_consistent(),
        "{ctx}: after recovery {rec:?}: {}",
        check.render()
    );
    // Every New-Order and Payment the driver saw commit is there; of those whose commit
    // failed at the cut, some may be there too (durable, but not acknowledged), no more.
    let orders = rows(&store, ORDERS) - orders_loaded;
    assert!(
        (new_orders..=new_orders + new_order_errors).contains(&orders),
        "{ctx}: {orders} new orders recovered; {new_orders} committed, {new_order_errors} failed"
    );
    let history = rows(&store, HISTORY) - history_loaded;
    assert!(
        (payments..=payments + payment_errors).contains(&history),
        "{ctx}: {history} payments recovered; {payments} committed, {payment_errors} failed"
    );

    // The recovered database keeps working and stays consistent.
    let report = tpcc::run(&store, &cfg, &driver, None).unwrap();
    assert_eq!(report.errors, 0, "{:?}", report.first_error);
    let check = tpcc::check(&store, 2).unwrap();
    assert!(check.is_consistent(), "{}", check.render());
    assert!(store.db().stats().commits > 0);
    store.close().unwrap();
}

#[test]
fn store_adapter_maps_conflicts_and_scans() {
    let spec = DeviceSpec::parse("mem").unwrap();
    let store = open(&spec.open().unwrap(), &spec.open().unwrap());
    store.create_table("t").unwrap();
    store.create_table("t").unwrap(); // idempotent
    let mut t = store.begin().unwrap();
    let t_t = t.open("t").unwrap();
    for i in 0..50u8 {
        t.put(t_t, &[i], &[i]).unwrap();
    }
    t.commit().unwrap();
    let mut r = store.begin_read().unwrap();
    let t_t = r.open("t").unwrap();
    let fwd = r.scan(t_t, &[10], Some(&[20]), 5, false).unwrap();
    assert_eq!(
        fwd.iter().map(|(k, _)| k[0]).collect::<Vec<_>>(),
        [10, 11, 12, 13, 14]
    );
    let rev = r.scan(t_t, &[10], Some(&[20]), 3, true).unwrap();
    assert_eq!(
        rev.iter().map(|(k, _)| k[0]).collect::<Vec<_>>(),
        [19, 18, 17]
    );
    assert!(r
        .scan(t_t, &[20], Some(&[10]), 3, false)
        .unwrap()
        .is_empty());
    drop(r);

    let mut a = store.begin().unwrap();
    let ta = a.open("t").unwrap();
    let mut b = store.begin().unwrap();
    let tb = b.open("t").unwrap();
    a.put(ta, &[1], b"a").unwrap();
    b.put(tb, &[1], b"b").unwrap();
    a.commit().unwrap();
    let lost = b.commit().err();
    assert!(
        matches!(lost, Some(pagoda_workload::StoreError::Conflict)),
        "the later writer must get a retryable conflict, got {lost:?}"
    );
    let mut d = store.begin().unwrap();
    assert!(d.open("missing").is_err(), "a missing table fails at open");
    let t_t = d.open("t").unwrap();
    assert_eq!(
        d.open("t").unwrap(),
        t_t,
        "a table opens once per transaction"
    );
    assert!(
        d.get(pagoda_workload::TableId::new(7), &[1]).is_err(),
        "a handle this transaction did not give out is refused"
    );
    assert!(d.delete(t_t, &[2]).unwrap());
    assert!(!d.delete(t_t, &[200]).unwrap());
    d.commit().unwrap();
}

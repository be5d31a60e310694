//! TPC-C on the engine on an emulated SSD: consistency conditions 1–4 hold after a run, and
//! again after a power cut in the middle of the workload and crash recovery.
#![allow(clippy::unwrap_used)] // test: a failure should panic with the cause

use pagoda::store::PagodaStore;
use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions};
use pagoda_workload::tpcc::{self, TpccConfig, TpccScale};
use pagoda_workload::{DriverConfig, RunLimit, Store};
use std::time::Duration;

fn open(data: &DeviceRef, log: &DeviceRef) -> PagodaStore {
    let opts = DbOptions::with_devices(data.clone(), log.clone())
        .buffer_bytes(8 << 20)
        // No background thread: after the "crash" nothing may touch the devices.
        .background(false);
    PagodaStore::new(Db::open(opts).unwrap(), "test".into())
}

#[test]
fn tpcc_is_consistent_after_a_power_cut_and_recovery() {
    let spec = DeviceSpec::parse("sata-ssd,capacity=1GiB").unwrap();
    let (data, log) = (spec.open().unwrap(), spec.open().unwrap());
    let cfg = TpccConfig {
        scale: TpccScale {
            items: 2_000,
            customers_per_district: 60,
        },
        ..TpccConfig::new(2)
    };
    let store = open(&data, &log);
    tpcc::load(&store, &cfg, 2, 7, None).unwrap();
    let driver = DriverConfig {
        threads: 2,
        limit: RunLimit::Ops(600),
        seed: 7,
        warmup: Duration::ZERO,
        ..DriverConfig::default()
    };
    let report = tpcc::run(&store, &cfg, &driver, None).unwrap();
    assert_eq!(report.errors, 0, "{:?}", report.first_error);
    let check = tpcc::check(&store, 2).unwrap();
    assert!(check.is_consistent(), "{}", check.render());
    let commits_before = store.db().stats().commits;

    // Crash: drop the engine without a checkpoint, then cut power on both devices; a part of
    // the unflushed writes (data pages written since the last flush) is lost or torn.
    drop(store);
    for (i, d) in [&data, &log].into_iter().enumerate() {
        d.as_power_cut().unwrap().power_cut(11 + i as u64).unwrap();
    }
    let store = open(&data, &log);
    let rec = store.db().stats().recovery;
    let check = tpcc::check(&store, 2).unwrap();
    assert!(
        check.is_consistent(),
        "after recovery {rec:?}: {}",
        check.render()
    );

    // The recovered database keeps working and stays consistent.
    let report = tpcc::run(&store, &cfg, &driver, None).unwrap();
    assert_eq!(report.errors, 0, "{:?}", report.first_error);
    let check = tpcc::check(&store, 2).unwrap();
    assert!(check.is_consistent(), "{}", check.render());
    assert!(store.db().stats().commits > 0 && commits_before > 0);
    store.close().unwrap();
}

#[test]
fn store_adapter_maps_conflicts_and_scans() {
    let spec = DeviceSpec::parse("mem").unwrap();
    let store = open(&spec.open().unwrap(), &spec.open().unwrap());
    store.create_table("t").unwrap();
    store.create_table("t").unwrap(); // idempotent
    let mut t = store.begin().unwrap();
    for i in 0..50u8 {
        t.put("t", &[i], &[i]).unwrap();
    }
    t.commit().unwrap();
    let mut r = store.begin_read().unwrap();
    let fwd = r.scan("t", &[10], Some(&[20]), 5, false).unwrap();
    assert_eq!(
        fwd.iter().map(|(k, _)| k[0]).collect::<Vec<_>>(),
        [10, 11, 12, 13, 14]
    );
    let rev = r.scan("t", &[10], Some(&[20]), 3, true).unwrap();
    assert_eq!(
        rev.iter().map(|(k, _)| k[0]).collect::<Vec<_>>(),
        [19, 18, 17]
    );
    assert!(r
        .scan("t", &[20], Some(&[10]), 3, false)
        .unwrap()
        .is_empty());
    drop(r);

    let mut a = store.begin().unwrap();
    let mut b = store.begin().unwrap();
    a.put("t", &[1], b"a").unwrap();
    b.put("t", &[1], b"b").unwrap();
    a.commit().unwrap();
    let lost = b.commit().err();
    assert!(
        matches!(lost, Some(pagoda_workload::StoreError::Conflict)),
        "the later writer must get a retryable conflict, got {lost:?}"
    );
    let mut d = store.begin().unwrap();
    assert!(d.delete("t", &[2]).unwrap());
    assert!(!d.delete("t", &[200]).unwrap());
    d.commit().unwrap();
}

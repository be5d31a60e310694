//! `precondition=1`: a device created in steady state (an aged drive) garbage-collects from
//! its first overwrites, starts with zeroed counters, and under emulated latency has no flash
//! work from the fill still pending when the first request comes.
#![allow(clippy::unwrap_used)]

use pagoda_device::spec::DeviceSpec;
use pagoda_device::WriteHints;
use std::time::Instant;

fn overwrite(dev: &pagoda_device::DeviceRef, units: u64) {
    let buf = vec![7u8; 4096];
    let cap = dev.caps().capacity_sectors;
    for i in 0..units {
        // A scattered but deterministic pattern over the whole device.
        let lpn = (i * 7919) % cap;
        dev.write(lpn, &buf, WriteHints::NORMAL).unwrap();
    }
    dev.flush().unwrap();
}

#[test]
fn preconditioned_device_collects_garbage_at_once() {
    let fresh = DeviceSpec::parse("sata-ssd,capacity=64MiB,op=0.2,streams=1,stripe=1")
        .unwrap()
        .open()
        .unwrap();
    let aged =
        DeviceSpec::parse("sata-ssd,capacity=64MiB,op=0.2,streams=1,stripe=1,precondition=1")
            .unwrap()
            .open()
            .unwrap();
    let s = aged.stats();
    assert_eq!((s.host_write_pages, s.flash_programs, s.gc_runs), (0, 0, 0));
    let n = fresh.caps().capacity_sectors / 4;
    overwrite(&fresh, n);
    overwrite(&aged, n);
    assert_eq!(fresh.stats().gc_runs, 0, "a fresh device has free blocks");
    let a = aged.stats();
    assert!(a.gc_runs > 0 && a.copybacks > 0, "{a:?}");
    assert!(a.waf > 1.5, "steady state amplifies writes: {a:?}");
    assert!(DeviceSpec::parse("sata-ssd,precondition=maybe")
        .unwrap()
        .open()
        .is_err());
}

#[test]
fn preconditioning_leaves_no_pending_flash_work() {
    let dev =
        DeviceSpec::parse("sata-ssd,capacity=256MiB,streams=1,precondition=1,latency=emulate")
            .unwrap()
            .open()
            .unwrap();
    let mut buf = vec![0u8; 4096];
    let t = Instant::now();
    for i in 0..20 {
        dev.read(i * 1000, &mut buf).unwrap();
    }
    // Twenty reads take a few ms; the fill's modelled flash time (tens of seconds) must not
    // be charged to them. A generous bound: the machine may be busy.
    assert!(
        t.elapsed().as_secs_f64() < 2.0,
        "first reads waited {:?}",
        t.elapsed()
    );
}

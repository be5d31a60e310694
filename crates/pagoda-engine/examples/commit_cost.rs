//! Measures the CPU cost of a single-key update commit on RAM devices (no sync latency).
#![allow(clippy::unwrap_used)]
use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(1 << 30).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(256 << 20).unwrap());
    let db = Db::open(DbOptions::with_devices(d, l)).unwrap();
    db.create_table("kv").unwrap();
    let n = 20_000u64;
    for c in 0..n / 500 {
        let tx = db.begin_write().unwrap();
        for i in c * 500..(c + 1) * 500 {
            tx.open_table("kv")
                .unwrap()
                .put(format!("user{i:016}").as_bytes(), &[1u8; 1024])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    let t0 = Instant::now();
    let m = 50_000u64;
    for j in 0..m {
        let i = (j * 7919) % n;
        let tx = db.begin_write().unwrap();
        tx.open_table("kv")
            .unwrap()
            .put(format!("user{i:016}").as_bytes(), &[j as u8; 1024])
            .unwrap();
        tx.commit().unwrap();
    }
    let us = t0.elapsed().as_secs_f64() * 1e6 / m as f64;
    println!("{us:.1} us per commit; stats {:?}", db.stats());
}

//! The emulated disk's command queue (`ncq=N`): reordering by shortest positioning time cuts
//! the modeled service time of random reads, aging bounds every wait, flush still waits for
//! queued writes, and `latency=count` keeps arrival order. Assertions are on modeled figures
//! (busy time, positioning, waits); the one wall-clock check is a lower bound a sleep ensures.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::hdd::{Hdd, HddConfig, HDD_KEYS, NCQ_AGE_MS};
use pagoda_device::raid::raid0_preset;
use pagoda_device::spec::DeviceSpec;
use pagoda_device::{BlockDevice, WriteHints, SECTOR_SIZE};
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// Modeled time scale of the emulate-mode tests: a random read of ~5 ms takes ~0.5 ms.
const SCALE: &str = "0.1";

fn disk(keys: &[(&str, &str)]) -> Hdd {
    let mut c = HddConfig::preset("hdd-15k").unwrap();
    for (k, v) in keys {
        c.set(k, v).unwrap();
    }
    Hdd::new(c).unwrap()
}

/// `threads` closed-loop readers, `per_thread` random 4 KiB reads each over the whole disk.
fn random_reads(d: &Hdd, threads: u64, per_thread: u32) {
    let cap = d.caps().capacity_sectors;
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(40 + t);
                let mut buf = vec![0; SECTOR_SIZE];
                for _ in 0..per_thread {
                    d.read(rng.gen_range(0..cap), &mut buf).unwrap();
                }
            });
        }
    });
}

/// Modeled busy time per request, ms.
fn busy_per_request_ms(d: &Hdd) -> f64 {
    let s = d.stats();
    s.busy_time_us as f64 / 1e3 / (s.host_read_requests + s.host_write_requests) as f64
}

#[test]
fn ncq_key_is_parsed_and_bad_values_name_the_fix() {
    assert!(HDD_KEYS.contains(&"ncq"));
    let mut c = HddConfig::preset("hdd-15k").unwrap();
    assert_eq!(c.ncq, 1, "FIFO by default");
    c.set("ncq", "32").unwrap();
    assert_eq!(c.ncq, 32);
    for bad in ["0", "-1", "many", "257", "3.5"] {
        let e = c.set("ncq", bad).unwrap_err().to_string();
        assert!(
            e.contains(&format!("ncq={bad}")) && e.contains("ncq=32"),
            "{e}"
        );
    }
    let d = DeviceSpec::parse("hdd-15k,ncq=32,latency=emulate")
        .unwrap()
        .open()
        .unwrap();
    assert!(d.describe().contains("ncq=32"), "{}", d.describe());
    assert!(!disk(&[]).describe().contains("ncq"));
    // RAID-0 forwards the key to every member.
    let keys = vec![("ncq".to_string(), "8".to_string())];
    assert!(raid0_preset("raid0-2x-hdd-15k", &keys).is_ok());
    let keys = vec![("ncq".to_string(), "0".to_string())];
    assert!(raid0_preset("raid0-2x-hdd-15k", &keys).is_err());
}

#[test]
fn count_mode_keeps_arrival_order_whatever_the_queue_depth() {
    let run = |ncq: &str| {
        let d = disk(&[("ncq", ncq)]);
        random_reads(&d, 1, 500);
        (d.stats().busy_time_us, d.queue_stats())
    };
    assert_eq!(run("1"), run("32"));
}

#[test]
fn reordering_cuts_the_modeled_service_time_of_random_reads() {
    let run = |ncq: &str| {
        let d = disk(&[("latency", "emulate"), ("time_scale", SCALE), ("ncq", ncq)]);
        random_reads(&d, 24, 25);
        let q = d.queue_stats();
        assert_eq!(q.served, 600);
        (busy_per_request_ms(&d), q.mean_position_ns / 1e6)
    };
    let (fifo_busy, fifo_pos) = run("1");
    let (ncq_busy, ncq_pos) = run("32");
    // FIFO: a random seek (3.4 ms) and half a revolution (2 ms) per read.
    assert!(
        (4.8..6.0).contains(&fifo_busy),
        "FIFO busy {fifo_busy:.2} ms per read"
    );
    assert!(
        ncq_busy < 0.7 * fifo_busy && ncq_pos < 0.7 * fifo_pos,
        "ncq=32: {ncq_busy:.2} ms busy, {ncq_pos:.2} ms positioning per read; \
         FIFO {fifo_busy:.2} / {fifo_pos:.2}"
    );
}

#[test]
fn aging_bounds_the_wait_of_a_far_request() {
    // Fifteen readers in a narrow band at the start of the disk, one at the far end: by
    // positioning time alone the far reads would wait until the band's readers finish.
    let d = disk(&[("latency", "emulate"), ("time_scale", SCALE), ("ncq", "32")]);
    let cap = d.caps().capacity_sectors;
    std::thread::scope(|s| {
        for t in 0..15u64 {
            let d = &d;
            s.spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                let mut buf = vec![0; SECTOR_SIZE];
                for _ in 0..120 {
                    d.read(rng.gen_range(0..cap / 1000), &mut buf).unwrap();
                }
            });
        }
        let d = &d;
        s.spawn(move || {
            let mut buf = vec![0; SECTOR_SIZE];
            for i in 0..4 {
                d.read(cap - 1 - i * 1000, &mut buf).unwrap();
            }
        });
    });
    let s = d.stats();
    let q = d.queue_stats();
    assert_eq!(q.served, 15 * 120 + 4);
    // The run lasts far longer than the bound, or the test would prove nothing.
    assert!(
        s.busy_time_us / 1000 > 3 * NCQ_AGE_MS,
        "busy {} ms",
        s.busy_time_us / 1000
    );
    // Past the bound a request waits at most for the one in service and older over-aged
    // ones: 16 services of at most a full seek, a revolution and a transfer (12 ms).
    let bound = (NCQ_AGE_MS + 16 * 12) * 1_000_000;
    assert!(
        q.max_wait_ns <= bound,
        "longest wait {} ms > {} ms",
        q.max_wait_ns / 1_000_000,
        bound / 1_000_000
    );
}

#[test]
fn flush_waits_for_every_queued_cached_write() {
    // A 64 KiB cache holds 16 writes; 16 writers of 8 writes each fill it and wait for room.
    let d = disk(&[
        ("latency", "emulate"),
        ("time_scale", SCALE),
        ("ncq", "32"),
        ("cache", "on"),
        ("cache_size", "64KiB"),
        ("capacity", "1GiB"),
    ]);
    let cap = d.caps().capacity_sectors;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..16u64 {
            let d = &d;
            s.spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                for _ in 0..8 {
                    d.write(rng.gen_range(0..cap), &[5; SECTOR_SIZE], WriteHints::NORMAL)
                        .unwrap();
                }
            });
        }
    });
    d.flush().unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let q = d.queue_stats();
    assert_eq!(
        q.served, 128,
        "every write reached the platter before the flush returned"
    );
    let busy = d.stats().busy_time_us as f64 / 1e6;
    assert!(
        wall >= busy * 0.1,
        "the flush returned at {wall} s, before the {busy} s modeled × 0.1 of the writes"
    );
    let r = d.as_power_cut().unwrap().power_cut(3).unwrap();
    assert_eq!(r.dropped_sectors, 0, "flushed writes survive a cut");
}

#[test]
fn a_paused_queued_disk_accrues_no_busy_time_and_resumes() {
    let d = disk(&[("latency", "emulate"), ("time_scale", SCALE), ("ncq", "32")]);
    d.pause_timing(true);
    random_reads(&d, 8, 50);
    assert_eq!(d.stats().busy_time_us, 0);
    d.pause_timing(false);
    d.reset_stats();
    random_reads(&d, 8, 10);
    let s = d.stats();
    assert_eq!(s.host_read_requests, 80);
    assert!(s.busy_time_us > 0);
    assert_eq!(d.queue_stats().served, 80);
}

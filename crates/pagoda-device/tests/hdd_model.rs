//! Tests of the emulated disk: calibration against the hdd-15k datasheet, queueing, data,
//! power cut, configuration errors.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::hdd::{Hdd, HddConfig, LatencyMode};
use pagoda_device::{BlockDevice, DeviceError, WriteHints, SECTOR_SIZE};
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn disk(keys: &[(&str, &str)]) -> Hdd {
    let mut c = HddConfig::preset("hdd-15k").unwrap();
    for (k, v) in keys {
        c.set(k, v).unwrap();
    }
    Hdd::new(c).unwrap()
}

#[test]
fn random_seek_averages_the_datasheet_figure() {
    let d = disk(&[]);
    let cap = d.caps().capacity_sectors;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let n = 200_000;
    let total: u64 = (0..n)
        .map(|_| d.seek_time_ns(rng.gen_range(0..cap), rng.gen_range(0..cap)))
        .sum();
    let avg_ms = total as f64 / f64::from(n) / 1e6;
    assert!(
        (avg_ms - 3.4).abs() < 0.05,
        "average seek {avg_ms} ms, want 3.4"
    );
    assert_eq!(d.seek_time_ns(5, 5), 0);
    let t2t = d.seek_time_ns(0, 1) as f64 / 1e6;
    assert!((t2t - 0.2).abs() < 0.01, "track-to-track {t2t}");
    let full = d.seek_time_ns(0, cap - 1) as f64 / 1e6;
    assert!((full - 7.0).abs() < 0.01, "full stroke {full}");
}

#[test]
fn random_reads_give_datasheet_iops_in_count_mode() {
    let d = disk(&[]);
    let cap = d.caps().capacity_sectors;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
    let mut buf = vec![0; SECTOR_SIZE];
    let n = 3000;
    for _ in 0..n {
        d.read(rng.gen_range(0..cap), &mut buf).unwrap();
    }
    let s = d.stats();
    assert_eq!(s.host_read_requests, n);
    let iops = n as f64 / (s.busy_time_us as f64 / 1e6);
    assert!(
        (165.0..200.0).contains(&iops),
        "modeled random-read IOPS {iops}"
    );
}

#[test]
fn sequential_reads_run_at_media_rate() {
    let d = disk(&[]);
    let mut buf = vec![0; 256 * SECTOR_SIZE];
    for i in 0..64u64 {
        d.read(i * 256, &mut buf).unwrap();
    }
    let s = d.stats();
    let mb_s = (64 * 256 * SECTOR_SIZE) as f64 / 1e6 / (s.busy_time_us as f64 / 1e6);
    assert!((180.0..215.0).contains(&mb_s), "sequential {mb_s} MB/s");
    // Inner tracks are slower.
    let d = disk(&[]);
    let end = d.caps().capacity_sectors - 64 * 256;
    for i in 0..64u64 {
        d.read(end + i * 256, &mut buf).unwrap();
    }
    let inner = (64 * 256 * SECTOR_SIZE) as f64 / 1e6 / (d.stats().busy_time_us as f64 / 1e6);
    assert!(
        (110.0..135.0).contains(&inner),
        "inner sequential {inner} MB/s"
    );
}

#[test]
fn emulate_mode_sleeps_and_serializes_threads() {
    let d = disk(&[("latency", "emulate"), ("time_scale", "0.02")]);
    let cap = d.caps().capacity_sectors;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let d = &d;
            s.spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                let mut buf = vec![0; SECTOR_SIZE];
                for _ in 0..25 {
                    d.read(rng.gen_range(0..cap), &mut buf).unwrap();
                }
            });
        }
    });
    let wall = t0.elapsed().as_secs_f64();
    let busy = d.stats().busy_time_us as f64 / 1e6;
    // 100 requests of ~5.4 ms modeled on one actuator, scaled by 0.02: ~11 ms of wall time.
    assert!(busy > 0.4 && busy < 0.7, "busy {busy}");
    assert!(
        wall >= busy * 0.02 * 0.9,
        "one actuator: wall {wall} < busy {busy} × scale"
    );
}

#[test]
fn data_roundtrip_and_write_through_durability() {
    let d = disk(&[("capacity", "64MiB")]);
    let data: Vec<u8> = (0..2 * SECTOR_SIZE).map(|i| (i % 253) as u8).collect();
    d.write(100, &data, WriteHints::NORMAL).unwrap();
    let mut back = vec![0; 2 * SECTOR_SIZE];
    d.read(100, &mut back).unwrap();
    assert_eq!(back, data);
    // cache=off: nothing acknowledged is lost.
    let r = d.as_power_cut().unwrap().power_cut(7).unwrap();
    assert_eq!(r.dropped_sectors, 0);
    d.read(100, &mut back).unwrap();
    assert_eq!(back, data);
    d.trim(100, 2).unwrap();
    d.read(100, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0));
    assert_eq!(d.caps().atomic_write_unit, None);
    assert!(matches!(
        d.write(0, &data, WriteHints::atomic(0)),
        Err(DeviceError::AtomicRejected(_))
    ));
}

#[test]
fn write_cache_loses_unflushed_writes_on_power_cut() {
    let mut lost = 0;
    for seed in 0..8 {
        let d = disk(&[("capacity", "64MiB"), ("cache", "on")]);
        d.write(0, &vec![1; SECTOR_SIZE], WriteHints::NORMAL)
            .unwrap();
        d.flush().unwrap();
        d.write(0, &vec![2; 8 * SECTOR_SIZE], WriteHints::NORMAL)
            .unwrap();
        let r = d.as_power_cut().unwrap().power_cut(seed).unwrap();
        lost += r.dropped_sectors;
        let mut b = vec![0; SECTOR_SIZE];
        d.read(0, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 1) || b.iter().all(|&x| x == 2));
    }
    assert!(lost > 0);
}

#[test]
fn write_cache_absorbs_writes_up_to_its_size() {
    let run = |cache_size: &str| {
        let d = disk(&[
            ("latency", "emulate"),
            ("time_scale", "0.05"),
            ("cache", "on"),
            ("cache_size", cache_size),
        ]);
        let cap = d.caps().capacity_sectors;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        let t0 = Instant::now();
        for _ in 0..32 {
            d.write(
                rng.gen_range(0..cap),
                &vec![3; SECTOR_SIZE],
                WriteHints::NORMAL,
            )
            .unwrap();
        }
        let acked = t0.elapsed().as_secs_f64();
        d.flush().unwrap();
        (acked, d.stats().busy_time_us as f64 / 1e6 * 0.05)
    };
    let (big_acked, big_busy) = run("16MiB");
    assert!(
        big_acked < big_busy * 0.3,
        "a big cache acknowledges at once: {big_acked} vs {big_busy}"
    );
    let (small_acked, small_busy) = run("64KiB");
    // 16 writes fit; the other 16 wait for earlier ones to reach the platter.
    assert!(
        small_acked > small_busy * 0.3,
        "a full cache must stall writes: {small_acked} vs {small_busy}"
    );
}

#[test]
fn configuration_errors_name_the_fix() {
    assert!(HddConfig::preset("hdd-7k").is_err());
    let mut c = HddConfig::preset("hdd-15k").unwrap();
    let e = c.set("spindles", "2").unwrap_err().to_string();
    assert!(e.contains("seek_avg_ms") && e.contains("capacity"), "{e}");
    assert!(c.set("latency", "fast").is_err());
    assert!(c.set("rpm", "0").is_err());
    assert!(c.set("time_scale", "-1").is_err());
    assert!(c.set("cache", "maybe").is_err());
    assert!(c.set("cache_size", "1").is_err());
    c.set("seek_avg_ms", "9").unwrap();
    assert!(matches!(Hdd::new(c.clone()), Err(DeviceError::Config(_))));
    c.set("seek_avg_ms", "3.4").unwrap();
    c.set("capacity", "1000").unwrap();
    assert!(Hdd::new(c.clone()).is_err());
    c.set("capacity", "1GiB").unwrap();
    c.set("latency", "emulate").unwrap();
    assert_eq!(c.latency, LatencyMode::Emulate);
    assert!(Hdd::new(c).is_ok());
}

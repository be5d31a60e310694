//! `latency=emulate` sanity checks at queue depth 1, with generous bounds (the machine is
//! shared; sleeps overshoot, by milliseconds while builds run). Performance figures live in
//! `benches/ssd.rs`.

use pagoda_device::ssd::Ssd;
use pagoda_device::{BlockDevice, WriteHints, SECTOR_SIZE};
use std::time::{Duration, Instant};

fn dev(opts: &[(&str, &str)]) -> Ssd {
    let mut all = vec![
        ("capacity", "256MiB"),
        ("op", "0.28"),
        ("latency", "emulate"),
        ("backing", "none"),
        ("streams", "1"),
    ];
    all.extend_from_slice(opts);
    Ssd::from_preset("sata-ssd", &all).expect("device")
}

fn mean_latency(n: u32, mut f: impl FnMut(u32)) -> Duration {
    let t = Instant::now();
    for i in 0..n {
        f(i);
    }
    t.elapsed() / n
}

#[test]
fn qd1_read_latency_is_near_the_nominal_figure() {
    // Nominal: 5 µs command + 60 µs tR + 10.2 µs channel + 7.4 µs SATA link ≈ 83 µs.
    let d = dev(&[]);
    for l in 0..64 {
        d.write_units(l * 97, 1, WriteHints::NORMAL).expect("write");
    }
    d.flush().expect("flush");
    let mut buf = vec![0u8; SECTOR_SIZE];
    let lat = mean_latency(64, |i| {
        d.read(u64::from(i) * 97, &mut buf).expect("read");
    });
    assert!(
        lat >= Duration::from_micros(70) && lat < Duration::from_millis(20),
        "QD1 read latency {lat:?}"
    );
    // Unwritten units need no flash read (wall-clock comparisons would be flaky on a shared
    // machine, so check the counter and a generous bound).
    let unmapped = mean_latency(64, |i| {
        d.read(1 + u64::from(i) * 97, &mut buf).expect("read");
    });
    assert!(
        unmapped < Duration::from_millis(20),
        "unmapped {unmapped:?}"
    );
    assert_eq!(d.stats().flash_reads, 64);
    assert!(d.stats().busy_time_us > 0);
}

#[test]
fn qd1_write_latency_cache_vs_write_through() {
    // With the cache a write is acknowledged after the link (≈ 12 µs); without it after the
    // program (≈ 820 µs).
    let cached = dev(&[]);
    let wc = mean_latency(32, |i| {
        cached
            .write_units(u64::from(i) * 7, 1, WriteHints::NORMAL)
            .expect("write");
    });
    let through = dev(&[("cache", "0")]);
    let wt = mean_latency(16, |i| {
        through
            .write_units(u64::from(i) * 7, 1, WriteHints::NORMAL)
            .expect("write");
    });
    assert!(wt >= Duration::from_micros(700), "write-through {wt:?}");
    assert!(wt < Duration::from_millis(20), "write-through {wt:?}");
    assert!(wc < wt, "cached {wc:?} vs write-through {wt:?}");
    // A flush waits for the programs still in flight.
    let t = Instant::now();
    cached.flush().expect("flush");
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn time_scale_shrinks_latency() {
    let d = dev(&[("time_scale", "0.1"), ("cache", "0")]);
    let lat = mean_latency(16, |i| {
        d.write_units(u64::from(i), 1, WriteHints::NORMAL)
            .expect("write");
    });
    // 820 µs modeled × 0.1.
    assert!(
        lat >= Duration::from_micros(70) && lat < Duration::from_millis(20),
        "{lat:?}"
    );
}

/// Many threads in emulate mode (sleeping outside the lock) read back what they wrote.
#[test]
fn concurrent_emulated_io_keeps_data() {
    let d = Ssd::from_preset(
        "nvme-ssd",
        &[
            ("capacity", "512MiB"),
            ("latency", "emulate"),
            ("time_scale", "0.01"),
        ],
    )
    .expect("device");
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let d = &d;
            s.spawn(move || {
                let mut w = vec![0u8; 2 * SECTOR_SIZE];
                let mut r = vec![0u8; 2 * SECTOR_SIZE];
                for i in 0..200u64 {
                    let lpn = t * 10_000 + (i * 37) % 5000;
                    w.fill((t * 31 + i) as u8);
                    d.write(lpn, &w, WriteHints::NORMAL).expect("write");
                    d.read(lpn, &mut r).expect("read");
                    assert_eq!(w, r, "thread {t} op {i}");
                }
            });
        }
    });
    let s = d.stats();
    assert_eq!(s.host_write_pages, 8 * 200 * 2);
    assert!(s.busy_time_us > 0);
}

//! `plp=1`: a write cache with power-loss protection (capacitors drain it at a cut). A flush
//! then needs no NAND program before it is acknowledged, and a power cut keeps everything
//! acknowledged. Latency bounds are generous (the machine is shared; sleeps overshoot).

use pagoda_device::ssd::Ssd;
use pagoda_device::{BlockDevice, WriteHints, SECTOR_SIZE};
use std::time::{Duration, Instant};

fn nvme(plp: &str, latency: &str) -> Ssd {
    Ssd::from_preset("nvme-ssd", &[("plp", plp), ("latency", latency)]).expect("device")
}

/// Mean time of one log-like step: write 8 KiB, then flush.
fn write_flush_latency(d: &Ssd, n: u32) -> Duration {
    let buf = vec![7u8; 2 * SECTOR_SIZE];
    let t = Instant::now();
    for i in 0..n {
        d.write(u64::from(i) * 2, &buf, WriteHints::NORMAL)
            .expect("write");
        d.flush().expect("flush");
    }
    t.elapsed() / n
}

#[test]
fn plp_flush_is_far_below_the_volatile_cache_flush() {
    // Without PLP the flush waits for the program (tPROG 660 µs); with it, only for the
    // command overhead (≈ 3 µs write + 3 µs flush, plus the link). Modeled time runs 100x
    // slower than real time here, so a shared machine's scheduling delays (a few ms under
    // load: this test failed at load average 8 with real-time latencies) stay small against
    // the modeled ones.
    let slow = |plp| {
        Ssd::from_preset(
            "nvme-ssd",
            &[("plp", plp), ("latency", "emulate"), ("time_scale", "100")],
        )
        .expect("device")
    };
    let volatile = write_flush_latency(&slow("0"), 8) / 100;
    let plp = write_flush_latency(&slow("1"), 32) / 100;
    assert!(
        volatile >= Duration::from_micros(600),
        "plp=0: {volatile:?} of modeled time"
    );
    assert!(
        plp * 5 < volatile,
        "plp=1 write+flush {plp:?} should be far below plp=0 {volatile:?} (modeled time)"
    );
}

fn sector(v: u8) -> Vec<u8> {
    vec![v; SECTOR_SIZE]
}

fn read(d: &Ssd, s: u64) -> Vec<u8> {
    let mut b = sector(0);
    d.read(s, &mut b).expect("read");
    b
}

#[test]
fn power_cut_keeps_flushed_data_with_and_without_plp() {
    for plp in ["0", "1"] {
        let d = nvme(plp, "count");
        for s in 0..64 {
            d.write(s, &sector(1), WriteHints::NORMAL).expect("write");
        }
        d.flush().expect("flush");
        let r = d.as_power_cut().expect("cut").power_cut(3).expect("cut");
        assert_eq!(r.dropped_sectors, 0, "plp={plp}: {r:?}");
        for s in 0..64 {
            assert_eq!(read(&d, s), sector(1), "plp={plp} sector {s}");
        }
    }
}

#[test]
fn plp_keeps_acknowledged_unflushed_writes_the_volatile_cache_loses_some() {
    // Overwrite flushed data without flushing, then cut: with plp the new data survives under
    // every seed; without it some seed loses some (so the check can fail).
    let mut volatile_lost = 0;
    for seed in 0..8 {
        for plp in ["0", "1"] {
            let d = nvme(plp, "count");
            assert_eq!(d.as_power_cut().expect("cut").durable_on_ack(), plp == "1");
            for s in 0..32 {
                d.write(s, &sector(1), WriteHints::NORMAL).expect("write");
            }
            d.flush().expect("flush");
            for s in 0..32 {
                d.write(s, &sector(2), WriteHints::NORMAL).expect("write");
            }
            d.as_power_cut().expect("cut").power_cut(seed).expect("cut");
            for s in 0..32 {
                let got = read(&d, s);
                if plp == "1" {
                    assert_eq!(got, sector(2), "plp=1 seed {seed} sector {s}");
                } else {
                    // Old or new, never anything else.
                    assert!(
                        got == sector(1) || got == sector(2),
                        "seed {seed} sector {s}"
                    );
                    volatile_lost += usize::from(got == sector(1));
                }
            }
        }
    }
    assert!(volatile_lost > 0, "plp=0 never lost an unflushed write");
}

#[test]
fn plp_key_is_validated() {
    let e = Ssd::from_preset("nvme-ssd", &[("plp", "maybe")]).expect_err("bad value");
    assert!(e.to_string().contains("plp=maybe: give 1"), "{e}");
    assert!(Ssd::from_preset("sata-ssd", &[("plp", "1")]).is_ok());
}

//! Unit tests that need the FTL's internals (invariant checks).

use super::*;
use crate::BlockDevice;

fn small(opts: &[(&str, &str)]) -> Ssd {
    let mut cfg = SsdConfig::preset("sata-ssd").expect("preset");
    for (k, v) in [
        ("capacity", "4MiB"),
        ("op", "0.25"),
        ("channels", "2"),
        ("dies", "1"),
        ("planes", "1"),
        ("page_size", "4KiB"),
        ("spare", "64"),
        ("pages_per_block", "16"),
        ("streams", "2"),
    ] {
        cfg.set(k, v).expect("key");
    }
    for (k, v) in opts {
        cfg.set(k, v).expect("key");
    }
    Ssd::new(cfg).expect("device")
}

#[test]
fn valid_counts_match_mapping_through_gc_flush_and_cut() {
    let d = small(&[]);
    let n = d.caps().capacity_sectors;
    let mut x = 12345u64;
    for i in 0..20_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let lpn = (x >> 33) % n;
        match i % 97 {
            0 => d.flush().expect("flush"),
            1 => d.trim(lpn, 1.min(n - lpn)).expect("trim"),
            2 => {
                d.power_cut(i).expect("cut");
            }
            _ => d
                .write_units(lpn, 1, WriteHints::stream((i % 2) as u16))
                .expect("write"),
        }
        if i % 1000 == 0 {
            d.check_invariants();
        }
    }
    d.check_invariants();
    assert!(d.stats().gc_runs > 0, "the test must exercise GC");
}

/// Writes tagged stream k land only in blocks of stream k, GC copies included.
#[test]
fn streams_stay_separated_through_gc() {
    let d = small(&[("streams", "3"), ("op", "0.5")]);
    let n = d.caps().capacity_sectors;
    let mut x = 7u64;
    for _ in 0..30_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Stream = lpn % 3, with a skewed (hot) choice of lpn so GC is busy in all streams.
        let lpn = if x >> 63 == 0 {
            (x >> 20) % (n / 8)
        } else {
            (x >> 20) % n
        };
        d.write_units(lpn, 1, WriteHints::stream((lpn % 3) as u16))
            .expect("write");
    }
    let f = d.ftl.lock();
    assert!(f.stats.gc_runs > 100);
    let upb = f.geo.units_per_block;
    for b in 0..f.geo.blocks {
        for ppn in b * upb..b * upb + f.written[b as usize] {
            let lpn = f.oob[ppn as usize].lpn;
            if lpn != NONE {
                assert_eq!(
                    u32::from(f.bstream[b as usize]),
                    lpn % 3,
                    "block {b} of stream {} holds unit {lpn}",
                    f.bstream[b as usize]
                );
            }
        }
    }
    for s in &f.stats.streams {
        assert!(s.gc_runs > 0 && s.copybacks > 0, "{s:?}");
    }
}

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

/// Capacity changes the blocks per parallel unit, never how many units host writes reach (the
/// old layout striped a 512 MiB `sata-ssd` over 2 of its 64 units and 1 GiB over 7).
#[test]
fn host_writes_reach_every_parallel_unit_at_any_capacity() {
    let mut reached = Vec::new();
    for capacity in ["512MiB", "1GiB", "8GiB"] {
        let d = Ssd::from_preset("sata-ssd", &[("capacity", capacity), ("backing", "none")])
            .expect("device");
        let (pus, cap) = (d.geometry().pus, d.caps().capacity_sectors);
        assert_eq!(d.geometry().stripe, pus, "{}", d.describe());
        // Four rounds over the stripe of stream 0, scattered over the logical space.
        for i in 0..u64::from(pus) * 4 {
            d.write_units(i * 7919 % cap, 1, WriteHints::NORMAL)
                .expect("write");
        }
        let f = d.ftl.lock();
        let mut seen = vec![false; pus as usize];
        for b in 0..f.geo.blocks {
            if f.written[b as usize] > 0 {
                seen[(b % pus) as usize] = true;
            }
        }
        reached.push(seen.iter().filter(|&&s| s).count());
    }
    assert_eq!(
        reached,
        [64, 64, 64],
        "parallel units reached at 512 MiB, 1 GiB, 8 GiB"
    );
}

/// Too small for one write point per unit even with the smallest blocks: a typed error naming
/// the smallest capacity, which itself works (and one smallest block less does not).
#[test]
fn too_small_a_capacity_names_the_smallest_one() {
    let e = SsdConfig::preset("sata-ssd")
        .and_then(|mut c| {
            c.set("capacity", "64MiB")?;
            c.geometry()
        })
        .expect_err("64 MiB at op 0.07 is too small");
    let crate::DeviceError::CapacityTooSmall { min_capacity, .. } = e else {
        panic!("expected CapacityTooSmall, got {e:?}");
    };
    assert!(e.to_string().contains("parallel unit"), "{e}");
    let smallest_block = u64::from(layout::MIN_PAGES_PER_BLOCK) * 8192;
    let at = |bytes: u64| {
        let mut c = SsdConfig::preset("sata-ssd").expect("preset");
        c.set("capacity", &bytes.to_string()).expect("capacity");
        c.geometry()
    };
    let g = at(min_capacity).expect("the named minimum works");
    assert_eq!(
        (g.stripe, g.pages_per_block),
        (64, layout::MIN_PAGES_PER_BLOCK)
    );
    assert!(at(min_capacity - smallest_block).is_err());
}

#[test]
fn split_breaks_plain_writes_only_and_keeps_their_data() {
    let d = small(&[("split", "4KiB")]);
    let page: Vec<u8> = (0..16 * 1024).map(|i| (i % 251) as u8).collect();
    d.write(4, &page, WriteHints::NORMAL).expect("plain write");
    assert_eq!(d.stats().host_write_requests, 4, "16 KiB in 4 KiB pieces");
    d.write(8, &page, WriteHints::atomic(0))
        .expect("atomic write");
    assert_eq!(
        d.stats().host_write_requests,
        5,
        "an atomic write stays whole"
    );
    let mut back = vec![0u8; page.len()];
    d.read(4, &mut back).expect("read");
    assert_eq!(back, page);
    let mut cfg = SsdConfig::preset("sata-ssd").expect("preset");
    cfg.set("split", "6KiB").expect("parses");
    let err = Ssd::new(cfg).expect_err("6 KiB is no multiple of 4 KiB");
    assert!(err.to_string().contains("split=6144"), "{err}");
}

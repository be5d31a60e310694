#![allow(clippy::unwrap_used)]

use super::*;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

/// Hits of an LRU cache of `cap` pages on `refs`, after `warm` uncounted references.
fn lru_hits(refs: &[u64], warm: usize, cap: usize) -> u64 {
    let mut stack: Vec<u64> = Vec::new(); // most recent last
    let mut hits = 0;
    for (i, &p) in refs.iter().enumerate() {
        if let Some(pos) = stack.iter().position(|&q| q == p) {
            stack.remove(pos);
            hits += u64::from(i >= warm);
        } else if stack.len() == cap {
            stack.remove(0);
        }
        stack.push(p);
    }
    hits
}

proptest! {
    #[test]
    fn equals_a_brute_force_lru_at_rate_one(
        refs in prop::collection::vec(0u64..24, 0..300),
        warm_frac in 0.0f64..0.5,
    ) {
        let warm = (refs.len() as f64 * warm_frac) as usize;
        let mrc = Mrc::from_references(&refs, warm, ShardsRate::FULL);
        let counted = (refs.len() - warm) as u64;
        prop_assert_eq!(mrc.references(), counted);
        for cap in 1..=26usize {
            let want = if counted == 0 { 0.0 } else { lru_hits(&refs, warm, cap) as f64 / counted as f64 };
            prop_assert_eq!(mrc.hit_ratio(cap as f64), want, "cache of {} pages", cap);
        }
    }
}

#[test]
fn cold_misses_and_a_loop_larger_than_the_cache() {
    // A loop over 4 pages, 3 times: LRU with 3 pages never hits; with 4 it hits every
    // reference after the first round.
    let refs: Vec<u64> = (0..12).map(|i| i % 4).collect();
    let mrc = Mrc::from_references(&refs, 0, ShardsRate::FULL);
    assert_eq!(mrc.hit_ratio(3.0), 0.0);
    assert_eq!(mrc.hit_ratio(4.0), 8.0 / 12.0);
    assert_eq!(mrc.hit_ratio(1e9), 8.0 / 12.0);
    assert_eq!(mrc.distinct_pages(), 4.0);
    // Primed with the loop's pages, the first round hits too.
    let warm = [0u64, 1, 2, 3];
    let all: Vec<u64> = warm.iter().chain(&refs).copied().collect();
    let mrc = Mrc::from_references(&all, warm.len(), ShardsRate::FULL);
    assert_eq!(mrc.hit_ratio(4.0), 1.0);
    assert_eq!(mrc.hit_ratio(3.0), 0.0);
}

#[test]
fn rates_outside_zero_one_are_refused_with_the_fix() {
    for bad in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let e = ShardsRate::new(bad).unwrap_err().to_string();
        assert!(e.contains("outside (0, 1]") && e.contains("use 1"), "{e}");
    }
    assert_eq!(ShardsRate::new(1.0).unwrap(), ShardsRate::FULL);
    assert!((ShardsRate::new(0.01).unwrap().rate() - 0.01).abs() < 1e-6);
}

#[test]
fn sampling_keeps_about_the_rate_of_pages() {
    let r = ShardsRate::new(0.1).unwrap();
    let kept = (0..100_000u64).filter(|&p| r.keeps(p)).count();
    assert!((9_000..11_000).contains(&kept), "{kept}");
}

#[test]
fn shards_at_one_in_ten_tracks_the_exact_curve() {
    // Skewed reads over 20,000 pages: page = 20000 * u^2 puts a tenth of the references on
    // 200 pages.
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let refs: Vec<u64> = (0..400_000)
        .map(|_| (20_000.0 * rng.gen::<f64>().powi(2)) as u64)
        .collect();
    let exact = Mrc::from_references(&refs, 0, ShardsRate::FULL);
    let rate = ShardsRate::new(0.1).unwrap();
    let sampled: Vec<u64> = refs.iter().copied().filter(|&p| rate.keeps(p)).collect();
    let approx = Mrc::from_references(&sampled, 0, rate).adjusted(refs.len() as u64);
    let mut worst = 0.0f64;
    for cap in [50.0, 200.0, 1_000.0, 4_000.0, 10_000.0, 20_000.0] {
        let (e, a) = (exact.hit_ratio(cap), approx.hit_ratio(cap));
        worst = worst.max((e - a).abs());
    }
    // SHARDS reports mean absolute errors around 0.01 at this rate; allow a few times that.
    assert!(worst < 0.03, "worst absolute error {worst}");
    assert!((approx.distinct_pages() / exact.distinct_pages() - 1.0).abs() < 0.1);
}

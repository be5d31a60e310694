//! Key-choice distributions shared by the workloads (YCSB's generators, LinkBench's skew).
//!
//! Generators hold only their own state and take the random source as an argument, so each
//! client thread owns its generators and a run is reproducible from its seed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rand::Rng;

/// YCSB's default zipfian constant θ.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Item count of YCSB's scrambled zipfian.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB's precomputed ζ(10^10, 0.99).
pub const SCRAMBLED_ZETAN: f64 = 26.46902820178302;

/// YCSB's FNV-1a-64 over the eight little-endian bytes of `v`, then the absolute value of the
/// result read as a signed 64-bit integer.
///
/// Java's `Math.abs(Long.MIN_VALUE)` stays negative; we return 2^63 for that single input.
pub fn fnv1a64(v: u64) -> u64 {
    const OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET;
    let mut v = v;
    for _ in 0..8 {
        h ^= v & 0xff;
        v >>= 8;
        h = h.wrapping_mul(PRIME);
    }
    (h as i64).unsigned_abs()
}

/// ζ(n, θ) = Σ_{i=1..n} i^-θ, continued from a partial sum over the first `from` items.
fn zeta_from(from: u64, n: u64, theta: f64, partial: f64) -> f64 {
    let mut sum = partial;
    for i in from..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// ζ(n, θ).
pub fn zeta(n: u64, theta: f64) -> f64 {
    zeta_from(0, n, theta, 0.0)
}

/// Gray et al.'s zipfian generator over `0..n` (item 0 is the most popular), as in YCSB.
///
/// The item count may grow ([`Zipfian::sample_n`]); ζ is then extended incrementally instead of
/// being recomputed.
#[derive(Debug, Clone)]
pub struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    zeta2: f64,
    eta: f64,
}

impl Zipfian {
    /// A generator over `0..n` with exponent `theta` (0 < θ < 1).
    pub fn new(n: u64, theta: f64) -> Self {
        Self::with_zetan(n, theta, zeta(n, theta))
    }

    /// A generator over `0..n` using a precomputed ζ(n, θ).
    pub fn with_zetan(n: u64, theta: f64, zetan: f64) -> Self {
        let zeta2 = zeta(2, theta);
        let mut z = Zipfian {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            zeta2,
            eta: 0.0,
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        (1.0 - (2.0 / self.n as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// Number of items.
    pub fn items(&self) -> u64 {
        self.n
    }

    /// ζ(n, θ) currently in use.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// η currently in use.
    pub fn eta(&self) -> f64 {
        self.eta
    }

    /// Draws an item in `0..n`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.draw(rng.gen::<f64>())
    }

    /// Draws an item in `0..n`, first growing the item count to `n` when it is larger (ζ is
    /// extended incrementally; a smaller `n` is ignored, as in YCSB).
    pub fn sample_n<R: Rng + ?Sized>(&mut self, n: u64, rng: &mut R) -> u64 {
        if n > self.n {
            self.zetan = zeta_from(self.n, n, self.theta, self.zetan);
            self.n = n;
            self.eta = self.compute_eta();
        }
        self.sample(rng)
    }

    /// The item selected by the uniform variate `u` in [0, 1).
    pub fn draw(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n.saturating_sub(1));
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n.saturating_sub(1))
    }
}

/// YCSB's scrambled zipfian over `0..n`: a zipfian over 10^10 items (ζ precomputed), hashed
/// with FNV so the popular items are scattered over the key space.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    n: u64,
    inner: Zipfian,
}

impl ScrambledZipfian {
    /// A generator over `0..n` (`n` ≥ 1).
    pub fn new(n: u64) -> Self {
        ScrambledZipfian {
            n: n.max(1),
            inner: Zipfian::with_zetan(SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    /// Draws an item in `0..n`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        fnv1a64(self.inner.sample(rng)) % self.n
    }
}

/// YCSB's skewed-latest: a zipfian over the current insert count; returns `max − z`, so the
/// newest keys are the hottest.
#[derive(Debug, Clone)]
pub struct Latest {
    zipf: Zipfian,
}

impl Latest {
    /// A generator whose newest item is initially `max` (`max` ≥ 1).
    pub fn new(max: u64) -> Self {
        Latest {
            zipf: Zipfian::new(max.max(1), ZIPFIAN_CONSTANT),
        }
    }

    /// Draws an item in `1..=max` (`max` is the newest acknowledged item; `z` ranges over
    /// `0..max`, as in YCSB).
    pub fn sample<R: Rng + ?Sized>(&mut self, max: u64, rng: &mut R) -> u64 {
        let z = self.zipf.sample_n(max.max(1), rng);
        max.saturating_sub(z)
    }
}

/// YCSB's hotspot generator: a fraction `op_fraction` of draws falls uniformly on the lowest
/// `data_fraction` of `0..n`, the rest uniformly on the remainder.
#[derive(Debug, Clone, Copy)]
pub struct Hotspot {
    n: u64,
    hot: u64,
    op_fraction: f64,
}

impl Hotspot {
    /// A generator over `0..n`.
    pub fn new(n: u64, data_fraction: f64, op_fraction: f64) -> Self {
        let n = n.max(1);
        let hot = ((n as f64 * data_fraction) as u64).clamp(1, n);
        Hotspot {
            n,
            hot,
            op_fraction,
        }
    }

    /// Size of the hot set.
    pub fn hot_items(&self) -> u64 {
        self.hot
    }

    /// Draws an item in `0..n`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        if self.hot == self.n || rng.gen::<f64>() < self.op_fraction {
            rng.gen_range(0..self.hot)
        } else {
            rng.gen_range(self.hot..self.n)
        }
    }
}

/// YCSB's acknowledged counter: hands out insert key numbers and tracks the highest number
/// below which every insert has been acknowledged, so readers never choose a key whose insert
/// is still in flight.
#[derive(Debug)]
pub struct AckCounter {
    next: AtomicU64,
    limit: AtomicU64,
    pending: Mutex<BTreeSet<u64>>,
}

impl AckCounter {
    /// A counter whose first number is `start`; numbers below `start` count as acknowledged.
    pub fn new(start: u64) -> Self {
        AckCounter {
            next: AtomicU64::new(start),
            limit: AtomicU64::new(start),
            pending: Mutex::new(BTreeSet::new()),
        }
    }

    /// Takes the next number.
    pub fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Marks `v` done (successful or not, as YCSB does) and advances the limit over every
    /// contiguous acknowledged number.
    pub fn acknowledge(&self, v: u64) {
        let mut pending = self.pending.lock();
        pending.insert(v);
        let mut limit = self.limit.load(Ordering::Acquire);
        while pending.remove(&limit) {
            limit += 1;
        }
        self.limit.store(limit, Ordering::Release);
    }

    /// Every number `< acknowledged()` has been acknowledged.
    pub fn acknowledged(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }
}

/// A log-normal size in bytes with the given median and σ, clamped to `1..=max`.
pub fn lognormal_size<R: Rng + ?Sized>(rng: &mut R, median: f64, sigma: f64, max: usize) -> usize {
    let n: f64 = rng.sample(rand_distr::StandardNormal);
    let v = (median * (sigma * n).exp()).round();
    (v.max(1.0) as usize).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// Exact probability of each item under the Gray algorithm, derived from `draw`'s formula:
    /// item k ≥ 2 is returned for u in [((k/n)^(1-θ) − 1 + η)/η, (((k+1)/n)^(1-θ) − 1 + η)/η),
    /// intersected with the region u ≥ (1 + 0.5^θ)/ζn.
    fn cell_probabilities(z: &Zipfian) -> Vec<f64> {
        let n = z.items();
        let (theta, eta, zetan) = (ZIPFIAN_CONSTANT, z.eta(), z.zetan());
        let lo = (1.0 + 0.5f64.powf(theta)) / zetan;
        let u_of = |k: u64| ((k as f64 / n as f64).powf(1.0 - theta) - 1.0 + eta) / eta;
        let mut p = vec![1.0 / zetan, lo - 1.0 / zetan];
        for k in 2..n {
            let a = u_of(k).max(lo);
            let b = if k + 1 == n { 1.0 } else { u_of(k + 1).max(lo) };
            p.push((b - a).max(0.0));
        }
        p
    }

    /// Pearson's χ² of `counts` against `probs`, merging cells with expectation < 5.
    fn chi_square(counts: &[u64], probs: &[f64], samples: u64) -> (f64, usize) {
        let (mut chi, mut cells) = (0.0, 0);
        let (mut obs, mut exp) = (0.0, 0.0);
        for (c, p) in counts.iter().zip(probs) {
            obs += *c as f64;
            exp += p * samples as f64;
            if exp >= 5.0 {
                chi += (obs - exp).powi(2) / exp;
                cells += 1;
                obs = 0.0;
                exp = 0.0;
            }
        }
        if exp > 0.0 {
            chi += (obs - exp).powi(2) / exp;
            cells += 1;
        }
        (chi, cells)
    }

    /// Upper 0.1 % point of χ² with `df` degrees of freedom (Wilson–Hilferty).
    fn chi_critical(df: usize) -> f64 {
        let k = df as f64;
        let z = 3.09;
        k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
    }

    #[test]
    fn fnv_matches_hand_computation() {
        // v = 0: eight rounds of h *= prime from the offset basis.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnv1a64(0), (h as i64).unsigned_abs());
        // Constants computed independently (Python) from the spec's algorithm; YCSB keys
        // for the first two records are "user6284781860667377211" and "user8517097267634966620".
        assert_eq!(fnv1a64(0), 0x5738_07CD_D7E5_C63B);
        assert_eq!(fnv1a64(1), 0x7632_CED6_E2D5_105C);
        assert_ne!(fnv1a64(1), fnv1a64(256));
    }

    #[test]
    fn zipfian_first_items_match_the_formula() {
        let n = 1000;
        let z = Zipfian::new(n, ZIPFIAN_CONSTANT);
        assert!((z.zetan() - zeta(n, 0.99)).abs() < 1e-12);
        let mut rng = SmallRng::seed_from_u64(1);
        let samples = 1_000_000u64;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..samples {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        // Item 0 and 1 are exact zipf: 1/ζ and 0.5^θ/ζ.
        let p0 = 1.0 / z.zetan();
        let p1 = 0.5f64.powf(0.99) / z.zetan();
        let f0 = counts[0] as f64 / samples as f64;
        let f1 = counts[1] as f64 / samples as f64;
        assert!((f0 - p0).abs() < 0.003, "f0 {f0} p0 {p0}");
        assert!((f1 - p1).abs() < 0.003, "f1 {f1} p1 {p1}");
        // The whole rank-frequency curve against the algorithm's exact cell probabilities.
        let probs = cell_probabilities(&z);
        assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let (chi, cells) = chi_square(&counts, &probs, samples);
        assert!(
            chi < chi_critical(cells - 1),
            "chi² {chi} over {cells} cells"
        );
        // And the curve is zipf-like: rank 10 vs rank 100 about (100/10)^θ apart.
        let ratio = (counts[9] + counts[10] + counts[11]) as f64
            / (counts[98] + counts[99] + counts[100]) as f64;
        assert!((ratio - 10f64.powf(0.99)).abs() < 2.0, "ratio {ratio}");
    }

    #[test]
    fn zipfian_chi_square_rejects_uniform() {
        // The test above must be able to fail: uniform draws are rejected.
        let n = 1000;
        let z = Zipfian::new(n, ZIPFIAN_CONSTANT);
        let mut rng = SmallRng::seed_from_u64(2);
        let samples = 200_000u64;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..samples {
            counts[rng.gen_range(0..n) as usize] += 1;
        }
        let (chi, cells) = chi_square(&counts, &cell_probabilities(&z), samples);
        assert!(chi > chi_critical(cells - 1));
    }

    #[test]
    fn incremental_zeta_equals_full_zeta() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut z = Zipfian::new(100, ZIPFIAN_CONSTANT);
        z.sample_n(5000, &mut rng);
        let full = Zipfian::new(5000, ZIPFIAN_CONSTANT);
        assert!((z.zetan() - full.zetan()).abs() < 1e-9);
        assert!((z.eta() - full.eta()).abs() < 1e-12);
    }

    #[test]
    fn scrambled_constant_is_zeta_of_ten_billion_and_keys_spread() {
        let mut rng = SmallRng::seed_from_u64(4);
        let n = 1000;
        let s = ScrambledZipfian::new(n);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..200_000 {
            counts[s.sample(&mut rng) as usize] += 1;
        }
        // The most popular key takes ~1/ζ(10^10) ≈ 3.8 % and is fnv(0) mod n, not item 0.
        let hottest = (0..n as usize).max_by_key(|&i| counts[i]).unwrap_or(0);
        assert_eq!(hottest as u64, fnv1a64(0) % n);
        let f = counts[hottest] as f64 / 200_000.0;
        assert!((f - 1.0 / SCRAMBLED_ZETAN).abs() < 0.004, "f {f}");
    }

    #[test]
    fn latest_prefers_newest() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut l = Latest::new(500);
        let max = 999;
        let samples = 500_000u64;
        let mut counts = vec![0u64; max as usize];
        for _ in 0..samples {
            let v = l.sample(max, &mut rng);
            assert!((1..=max).contains(&v));
            counts[(max - v) as usize] += 1;
        }
        let z = Zipfian::new(max, ZIPFIAN_CONSTANT);
        let (chi, cells) = chi_square(&counts, &cell_probabilities(&z), samples);
        assert!(
            chi < chi_critical(cells - 1),
            "chi² {chi} over {cells} cells"
        );
    }

    #[test]
    fn hotspot_sends_eighty_percent_to_twenty_percent() {
        let mut rng = SmallRng::seed_from_u64(6);
        let h = Hotspot::new(1000, 0.2, 0.8);
        assert_eq!(h.hot_items(), 200);
        let samples = 400_000u64;
        let mut counts = vec![0u64; 1000];
        for _ in 0..samples {
            counts[h.sample(&mut rng) as usize] += 1;
        }
        let hot: u64 = counts[..200].iter().sum();
        let f = hot as f64 / samples as f64;
        assert!((f - 0.8).abs() < 0.005, "hot fraction {f}");
        // Uniform within each part: χ² against 0.8/200 and 0.2/800.
        let probs: Vec<f64> = (0..1000)
            .map(|i| if i < 200 { 0.8 / 200.0 } else { 0.2 / 800.0 })
            .collect();
        let (chi, cells) = chi_square(&counts, &probs, samples);
        assert!(chi < chi_critical(cells - 1), "chi² {chi}");
    }

    #[test]
    fn ack_counter_advances_over_contiguous_acks() {
        let c = AckCounter::new(10);
        let (a, b, d) = (c.next(), c.next(), c.next());
        assert_eq!((a, b, d), (10, 11, 12));
        assert_eq!(c.acknowledged(), 10);
        c.acknowledge(11);
        assert_eq!(c.acknowledged(), 10);
        c.acknowledge(10);
        assert_eq!(c.acknowledged(), 12);
        c.acknowledge(12);
        assert_eq!(c.acknowledged(), 13);
    }

    #[test]
    fn lognormal_median_and_cap() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut v: Vec<usize> = (0..100_001)
            .map(|_| lognormal_size(&mut rng, 128.0, 1.0, 100_000))
            .collect();
        v.sort_unstable();
        let median = v[50_000] as f64;
        assert!((median - 128.0).abs() < 4.0, "median {median}");
        assert!((0..1000).all(|_| lognormal_size(&mut rng, 8.0, 1.0, 254) <= 254));
    }
}

//! Miss-ratio curves of the buffer pool from one run (beyond the buffer-sizing paper, which
//! swept the buffer size run by run).
//!
//! [`crate::Db::start_page_trace`] records every logical page access of the pool (each fix
//! by page id, hit or miss) into a [`PageTrace`]; [`Mrc::from_trace`] turns it into the hit
//! ratio an LRU cache of *any* size would have had on the same references:
//!
//! * **Mattson stack distances.** The stack distance of a reference is the number of distinct
//!   pages referenced since the previous reference to the same page, itself included. An LRU
//!   cache of `C` pages hits exactly the references with distance `<= C`, so one pass gives
//!   the whole curve. Distances come from a Fenwick tree over reference times that marks the
//!   latest reference of each page: `O(n log n)` for `n` references.
//! * **SHARDS** (Waldspurger et al., FAST '15), fixed-rate spatial sampling: a page is
//!   traced iff `hash(page id) mod P < T`, rate `R = T / P`. The sampled pages see the
//!   references of all their own accesses, so a distance `d` in the sample stands for `d / R`
//!   in the full trace. At `R = 1` the curve is exact. With the count of all references
//!   ([`PageTrace::total`]) the curve is adjusted as SHARDS-adj does: the difference between
//!   the expected (`total * R`) and the actual number of sampled references goes to the
//!   smallest distances, which corrects most of the error a heavily referenced page that
//!   happens to be in (or out of) the sample causes. What it cannot correct: at cache sizes
//!   below about `100 / R` pages the curve rests on the few hot pages that happen to be
//!   sampled (a B+tree's root takes a third of the fixes of a three-level point read), so
//!   small sizes are rough below `R = 1`.
//!
//! The engine's pool is not a pure LRU: it inserts new pages at the midpoint (the old zone's
//! head) and promotes on a later hit (`buffer/lru.rs`), so a page touched once leaves sooner
//! than under LRU. The curve is the pure-LRU prediction for the same references; for uniform
//! and skewed point reads the two agree closely, and a real buffer sweep shows the gap.

use crate::error::{Error, Result};
use std::collections::HashMap;

/// The SHARDS modulus `P`: rates are multiples of `1 / P`.
const MODULUS: u64 = 1 << 24;

/// A SHARDS sampling rate in `(0, 1]`: the fraction of page ids traced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardsRate {
    threshold: u64,
}

impl ShardsRate {
    /// Every page traced (exact curve).
    pub const FULL: Self = Self { threshold: MODULUS };

    /// A rate in `(0, 1]` (rounded to a multiple of 2^-24); `Error::Config` outside it.
    pub fn new(rate: f64) -> Result<Self> {
        if !(rate.is_finite() && rate > 0.0 && rate <= 1.0) {
            return Err(Error::config(format!(
                "sample rate {rate} is outside (0, 1]: use 1 for an exact curve, or e.g. 0.01 \
                 for a trace of hundreds of millions of references"
            )));
        }
        let threshold = ((rate * MODULUS as f64).round() as u64).clamp(1, MODULUS);
        Ok(Self { threshold })
    }

    /// `T`, in `1..=P`.
    pub(crate) fn threshold(self) -> u64 {
        self.threshold
    }

    /// The rate of a [`ShardsRate::threshold`] (clamped into `1..=P`).
    pub(crate) fn from_threshold(t: u64) -> Self {
        Self {
            threshold: t.clamp(1, MODULUS),
        }
    }

    /// The rate `R = T / P`.
    pub fn rate(self) -> f64 {
        self.threshold as f64 / MODULUS as f64
    }

    /// Whether references to `page` are traced.
    #[inline]
    pub fn keeps(self, page: u64) -> bool {
        self.threshold == MODULUS || mix(page) % MODULUS < self.threshold
    }
}

/// A 64-bit finaliser (splitmix64): page ids are dense, so their low bits must be mixed
/// before sampling on them.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The page references a [`crate::Db`] recorded ([`crate::Db::take_page_trace`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PageTrace {
    /// The sampling rate the references were kept at (`None` when nothing was recorded).
    pub rate: Option<ShardsRate>,
    /// The sampled pages resident when recording started, coldest first: they prime the LRU
    /// stack, so that a page the pool already held is not counted as a cold miss, and are not
    /// references themselves.
    pub warm: Vec<u64>,
    /// The sampled references, in the order they happened (between threads, approximately).
    pub references: Vec<u64>,
    /// Sampled references not kept because the recorder was full
    /// ([`PageTrace::MAX_REFERENCES`]); lower the rate when this is not zero.
    pub dropped: u64,
    /// All page fixes while recording, sampled or not (counted references excluded the
    /// `warm` pages; 0 when unknown).
    pub total: u64,
    /// Page size of the database, bytes.
    pub page_size: usize,
}

impl PageTrace {
    /// At most this many references are kept (16 bytes each while recording).
    pub const MAX_REFERENCES: u64 = 1 << 26;
}

/// A miss-ratio curve: the histogram of (sampled) LRU stack distances of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Mrc {
    rate: f64,
    /// `within[d]`: counted references with sampled distance `<= d`.
    within: Vec<u64>,
    references: u64,
    distinct: u64,
}

impl Mrc {
    /// The curve of a recorded trace (at its own sampling rate).
    pub fn from_trace(t: &PageTrace) -> Self {
        let rate = t.rate.unwrap_or(ShardsRate::FULL);
        let all: Vec<u64> = t.warm.iter().chain(&t.references).copied().collect();
        let mrc = Self::from_references(&all, t.warm.len(), rate);
        let sampled = t.references.len() as u64 + t.dropped;
        if t.total == 0 || sampled == 0 {
            return mrc;
        }
        // References the full recorder dropped count in `total` but not in the sample.
        let kept = t.references.len() as f64 / sampled as f64;
        mrc.adjusted((t.total as f64 * kept) as u64)
    }

    /// SHARDS-adj: scales the sample to `total` references (sampled or not) by giving the
    /// difference between `total * R` and the sampled count to the smallest distance (taking
    /// it away from the smallest distances when the sample has too many).
    pub fn adjusted(mut self, total: u64) -> Self {
        let expected = (total as f64 * self.rate).round() as i64;
        let diff = expected - self.references as i64;
        if diff == 0 || self.references == 0 || self.within.len() < 2 {
            return self;
        }
        // Per-distance counts, corrected, then summed again.
        let mut hist: Vec<i64> = std::iter::once(0)
            .chain(self.within.windows(2).map(|w| (w[1] - w[0]) as i64))
            .collect();
        let mut left = diff;
        for h in hist.iter_mut().skip(1) {
            let take = left.max(-*h);
            *h += take;
            left -= take;
            if left == 0 {
                break;
            }
        }
        let mut acc = 0u64;
        for (w, h) in self.within.iter_mut().zip(&hist) {
            acc += *h as u64;
            *w = acc;
        }
        self.references = (self.references as i64 + diff - left) as u64;
        self
    }

    /// The curve of `refs`, of which the first `warm` only prime the stack. `refs` must hold
    /// only pages `rate` keeps (as a recorded trace does).
    pub fn from_references(refs: &[u64], warm: usize, rate: ShardsRate) -> Self {
        let n = refs.len();
        let mut fen = Fenwick::new(n);
        let mut last: HashMap<u64, usize> = HashMap::new();
        let mut hist: Vec<u64> = vec![0];
        let mut references = 0u64;
        for (i, &page) in refs.iter().enumerate() {
            let counted = i >= warm;
            references += u64::from(counted);
            if let Some(t) = last.insert(page, i) {
                // Marked times after `t` are the distinct pages referenced since; `+ 1` for
                // the page itself.
                let d = (fen.prefix(i).wrapping_sub(fen.prefix(t + 1))) as usize + 1;
                fen.add(t, u32::MAX);
                if counted {
                    if hist.len() <= d {
                        hist.resize(d + 1, 0);
                    }
                    hist[d] += 1;
                }
            }
            fen.add(i, 1);
        }
        let mut within = hist;
        for d in 1..within.len() {
            within[d] += within[d - 1];
        }
        Self {
            rate: rate.rate(),
            within,
            references,
            distinct: last.len() as u64,
        }
    }

    /// Hit ratio of an LRU cache of `cache_pages` pages on the trace (0 for an empty trace).
    /// Sampled distances are scaled by `1 / R`; between two scaled distances the count is
    /// interpolated linearly, so the curve is continuous and non-decreasing.
    pub fn hit_ratio(&self, cache_pages: f64) -> f64 {
        if self.references == 0 || cache_pages <= 0.0 {
            return 0.0;
        }
        let x = cache_pages * self.rate;
        let top = self.within.len() - 1;
        let k = (x.floor() as usize).min(top);
        let mut hits = self.within[k] as f64;
        if k < top {
            hits += (x - k as f64) * (self.within[k + 1] - self.within[k]) as f64;
        }
        hits / self.references as f64
    }

    /// `1 - hit_ratio`.
    pub fn miss_ratio(&self, cache_pages: f64) -> f64 {
        1.0 - self.hit_ratio(cache_pages)
    }

    /// Counted (sampled) references.
    pub fn references(&self) -> u64 {
        self.references
    }

    /// Distinct pages the trace touched, scaled to the full trace (`sampled / R`).
    pub fn distinct_pages(&self) -> f64 {
        self.distinct as f64 / self.rate
    }

    /// The sampling rate.
    pub fn rate(&self) -> f64 {
        self.rate
    }
}

/// A Fenwick (binary indexed) tree of counts over reference times. Counts are `u32` with
/// wrapping adds (`u32::MAX` is -1): every prefix sum is a number of distinct pages, which
/// fits.
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Self {
            tree: vec![0; n + 1],
        }
    }

    fn add(&mut self, i: usize, v: u32) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add(v);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum over times `0..i`.
    fn prefix(&self, i: usize) -> u32 {
        let mut i = i;
        let mut s = 0u32;
        while i > 0 {
            s = s.wrapping_add(self.tree[i]);
            i &= i - 1;
        }
        s
    }
}

#[cfg(test)]
mod tests;

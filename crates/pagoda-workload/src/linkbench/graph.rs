//! The shape of the generated graph: which node id sits at which popularity rank, how many
//! links each node has, and where they point. All of it is a pure function of the node count,
//! so loaders and request threads agree without sharing state or memory.
//!
//! Rank 0 is the hottest node and the one with the most links ("hot ids are the high-degree
//! ones"): out-degrees are assigned by rank from the upper tail of LinkBench's empirical
//! distribution downwards (stratified, so any node count reproduces the distribution), and a
//! keyed Feistel permutation scatters ranks over the ids `1..=n`.

use super::degree_table::NLINKS_CDF;

/// A bijection of `0..n` (Feistel network with cycle walking).
#[derive(Debug, Clone, Copy)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    key: u64,
}

const ROUNDS: u64 = 4;

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Permutation {
    /// A permutation of `0..n` keyed by `key`.
    pub fn new(n: u64, key: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        Permutation {
            n: n.max(1),
            half_bits,
            key,
        }
    }

    fn round(&self, r: u64, x: u64) -> u64 {
        mix64(x ^ self.key.wrapping_add(r.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
            & ((1 << self.half_bits) - 1)
    }

    fn encrypt(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for i in 0..ROUNDS {
            let t = l ^ self.round(i, r);
            l = r;
            r = t;
        }
        (l << self.half_bits) | r
    }

    fn decrypt(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for i in (0..ROUNDS).rev() {
            let t = r ^ self.round(i, l);
            r = l;
            l = t;
        }
        (l << self.half_bits) | r
    }

    /// The image of `x` (< n).
    pub fn apply(&self, x: u64) -> u64 {
        let mut y = self.encrypt(x);
        while y >= self.n {
            y = self.encrypt(y);
        }
        y
    }

    /// The preimage of `y` (< n).
    pub fn invert(&self, y: u64) -> u64 {
        let mut x = self.decrypt(y);
        while x >= self.n {
            x = self.decrypt(x);
        }
        x
    }
}

/// The out-degree of the node at popularity rank `rank` of `n` (rank 0 has the most links):
/// the empirical quantile at `1 − (rank + ½)/n`.
pub fn degree_at_rank(rank: u64, n: u64) -> u32 {
    let u = 100.0 * (1.0 - (rank as f64 + 0.5) / n.max(1) as f64);
    let i = NLINKS_CDF.partition_point(|&(_, cdf)| cdf < u);
    NLINKS_CDF
        .get(i)
        .or(NLINKS_CDF.last())
        .map_or(0, |&(links, _)| links)
}

/// Mean out-degree of the embedded distribution.
pub fn mean_degree() -> f64 {
    let mut prev = 0.0;
    let mut mean = 0.0;
    for &(links, cdf) in NLINKS_CDF {
        mean += f64::from(links) * (cdf - prev) / 100.0;
        prev = cdf;
    }
    mean
}

/// The graph over node ids `1..=n`.
#[derive(Debug, Clone, Copy)]
pub struct Graph {
    n: u64,
    perm: Permutation,
    stride: u64,
}

impl Graph {
    /// The graph of `n` nodes (≥ 2).
    pub fn new(n: u64) -> Self {
        let n = n.max(2);
        // A stride coprime with n makes a node's link targets distinct.
        let stride = [7_919u64, 104_729, 1_299_709, 15_485_863]
            .into_iter()
            .map(|s| s % n)
            .find(|&s| s != 0 && gcd(s, n) == 1)
            .unwrap_or(1);
        Graph {
            n,
            perm: Permutation::new(n, 0x6c69_6e6b_6265_6e63),
            stride,
        }
    }

    /// Nodes loaded.
    pub fn nodes(&self) -> u64 {
        self.n
    }

    /// The id of the node at popularity rank `rank` (< n).
    pub fn id_at_rank(&self, rank: u64) -> u64 {
        self.perm.apply(rank % self.n) + 1
    }

    /// The popularity rank of loaded node `id` (1..=n).
    pub fn rank_of(&self, id: u64) -> u64 {
        self.perm.invert((id - 1) % self.n)
    }

    /// Links loaded for node `id` (0 for ids added later), below `n`.
    pub fn degree(&self, id: u64) -> u32 {
        if id == 0 || id > self.n {
            return 0;
        }
        let d = degree_at_rank(self.rank_of(id), self.n);
        d.min(u32::try_from(self.n - 1).unwrap_or(u32::MAX))
    }

    /// The `j`-th loaded link of `id1`: (link type in 1..=types, id2).
    pub fn link(&self, id1: u64, j: u32, types: u32) -> (u32, u64) {
        let t = 1 + j % types.max(1);
        let id2 = (id1 - 1 + (u64::from(j) + 1) * self.stride) % self.n + 1;
        (t, id2)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn permutation_is_a_bijection_with_inverse() {
        for n in [1u64, 2, 7, 1000, 1024, 4097] {
            let p = Permutation::new(n, 42);
            let image: HashSet<u64> = (0..n).map(|x| p.apply(x)).collect();
            assert_eq!(image.len() as u64, n);
            assert!(image.iter().all(|&y| y < n));
            assert!((0..n).all(|x| p.invert(p.apply(x)) == x));
        }
        // It scatters: the first ranks are not the first ids.
        let p = Permutation::new(1000, 42);
        assert!((0..10).any(|x| p.apply(x) > 100));
    }

    #[test]
    fn degrees_follow_the_empirical_table() {
        let n = 1_000_000;
        let degrees: Vec<u32> = (0..n).map(|r| degree_at_rank(r, n)).collect();
        let zero = degrees.iter().filter(|&&d| d == 0).count() as f64 / n as f64;
        assert!((zero - 0.4533).abs() < 0.001, "zero share {zero}");
        let le1 = degrees.iter().filter(|&&d| d <= 1).count() as f64 / n as f64;
        assert!((le1 - 0.7746).abs() < 0.001, "le1 {le1}");
        let mean = degrees.iter().map(|&d| f64::from(d)).sum::<f64>() / n as f64;
        assert!((3.5..4.8).contains(&mean), "mean {mean}");
        assert!((mean_degree() - 4.097).abs() < 0.01, "{}", mean_degree());
        // Rank order is degree order.
        assert!(degrees.windows(2).all(|w| w[0] >= w[1]));
        assert!(degrees[0] > 1000);
    }

    #[test]
    fn hot_nodes_have_many_distinct_links() {
        let g = Graph::new(1000);
        let hot = g.id_at_rank(0);
        assert_eq!(g.rank_of(hot), 0);
        assert!(g.degree(hot) >= g.degree(g.id_at_rank(100)));
        assert!(g.degree(hot) > 20, "{}", g.degree(hot));
        let targets: HashSet<(u32, u64)> = (0..g.degree(hot)).map(|j| g.link(hot, j, 2)).collect();
        assert_eq!(targets.len() as u32, g.degree(hot));
        assert!(targets
            .iter()
            .all(|&(t, id2)| (1..=2).contains(&t) && (1..=1000).contains(&id2)));
        assert_eq!(g.degree(1001), 0);
    }
}

//! TPC-C's random inputs: NURand with run constants, last names, and the string generators of
//! clause 4.3.2.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// NURand's A for customer last names.
pub const A_C_LAST: u32 = 255;
/// NURand's A for customer ids.
pub const A_C_ID: u32 = 1023;
/// NURand's A for item ids.
pub const A_OL_I_ID: u32 = 8191;

/// `NURand(A, x, y) = (((rand(0,A) | rand(x,y)) + C) mod (y − x + 1)) + x`.
pub fn nurand<R: Rng + ?Sized>(rng: &mut R, a: u32, x: u32, y: u32, c: u32) -> u32 {
    let r = rng.gen_range(0..=a) | rng.gen_range(x..=y);
    (r.wrapping_add(c)) % (y - x + 1) + x
}

/// NURand's C constants, drawn once per run from the run seed (clause 2.1.6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CConstants {
    /// C for C_LAST when loading.
    pub c_last_load: u32,
    /// C for C_LAST when running; |run − load| is in 65..=119 and not 96 or 112.
    pub c_last_run: u32,
    /// C for C_ID.
    pub c_id: u32,
    /// C for OL_I_ID.
    pub ol_i_id: u32,
}

impl CConstants {
    /// The constants of a database loaded (and run) with `seed`. The load constant depends on
    /// the seed only, so a run with the load's seed satisfies the delta rule.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x7470_6363_434f_4e53);
        let c_last_load = rng.gen_range(0..=A_C_LAST);
        let c_last_run = loop {
            let c = rng.gen_range(0..=A_C_LAST);
            let delta = c.abs_diff(c_last_load);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                break c;
            }
        };
        CConstants {
            c_last_load,
            c_last_run,
            c_id: rng.gen_range(0..=A_C_ID),
            ol_i_id: rng.gen_range(0..=A_OL_I_ID),
        }
    }
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The last name of number `n` in 0..=999: its three digits' syllables.
pub fn last_name(n: u32) -> String {
    let n = n % 1000;
    let mut s = String::with_capacity(15);
    for d in [n / 100, (n / 10) % 10, n % 10] {
        s.push_str(SYLLABLES[d as usize]);
    }
    s
}

const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A random alphanumeric string of `min..=max` characters.
pub fn astring(rng: &mut SmallRng, min: usize, max: usize) -> String {
    let n = rng.gen_range(min..=max);
    (0..n)
        .map(|_| ALNUM[rng.gen_range(0..ALNUM.len())] as char)
        .collect()
}

/// A random numeric string of `min..=max` digits.
pub fn nstring(rng: &mut SmallRng, min: usize, max: usize) -> String {
    let n = rng.gen_range(min..=max);
    (0..n)
        .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
        .collect()
}

/// A zip code: 4 random digits then "11111".
pub fn zip(rng: &mut SmallRng) -> String {
    let mut z = nstring(rng, 4, 4);
    z.push_str("11111");
    z
}

/// I_DATA / S_DATA: 26..50 characters, 10 % of them containing "ORIGINAL" at a random place.
pub fn data_with_original(rng: &mut SmallRng) -> String {
    let s = astring(rng, 26, 50);
    if rng.gen_range(0..10) == 0 {
        let at = rng.gen_range(0..=s.len() - 8);
        format!("{}ORIGINAL{}", &s[..at], &s[at + 8..])
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = SmallRng::seed_from_u64(1);
        let c = CConstants::from_seed(3);
        let mut counts = vec![0u32; 3001];
        for _ in 0..300_000 {
            let v = nurand(&mut rng, A_C_ID, 1, 3000, c.c_id);
            assert!((1..=3000).contains(&v));
            counts[v as usize] += 1;
        }
        for _ in 0..100_000 {
            let i = nurand(&mut rng, A_OL_I_ID, 1, 100_000, c.ol_i_id);
            assert!((1..=100_000).contains(&i));
            let n = nurand(&mut rng, A_C_LAST, 0, 999, c.c_last_run);
            assert!(n <= 999);
        }
        // Non-uniform: the busiest id gets several times the uniform share (100 per id).
        let max = counts.iter().max().copied().unwrap_or(0);
        assert!(max > 250, "max {max}");
        let hit = counts[1..].iter().filter(|&&n| n > 0).count();
        assert!(hit > 2900, "{hit} ids drawn");
    }

    #[test]
    fn c_constants_obey_the_delta_rule() {
        for seed in 0..200 {
            let c = CConstants::from_seed(seed);
            let d = c.c_last_run.abs_diff(c.c_last_load);
            assert!((65..=119).contains(&d) && d != 96 && d != 112, "{c:?}");
            assert!(c.c_id <= A_C_ID && c.ol_i_id <= A_OL_I_ID);
        }
        assert_eq!(CConstants::from_seed(5), CConstants::from_seed(5));
    }

    #[test]
    fn last_names_and_strings() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
        let mut rng = SmallRng::seed_from_u64(2);
        let z = zip(&mut rng);
        assert!(z.len() == 9 && z.ends_with("11111"));
        let originals = (0..10_000)
            .filter(|_| {
                let d = data_with_original(&mut rng);
                assert!((26..=50).contains(&d.len()));
                d.contains("ORIGINAL")
            })
            .count();
        assert!((800..1200).contains(&originals), "{originals}");
    }
}

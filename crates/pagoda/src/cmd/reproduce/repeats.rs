//! Repeated runs of a cell and what the report makes of them: a cell runs once per seed, a
//! table shows the median of its repeats, and a headline ratio is computed per seed (the two
//! configurations of one repeat ran back to back) and shown as median with min–max. A band
//! is held against the whole min–max, so one lucky run cannot make a verdict.

use super::cell::CellResult;
use serde_json::Value;
use std::collections::BTreeMap;

/// The usable repeats of one cell (one per seed).
#[derive(Clone, Debug)]
pub(crate) struct Group<'a> {
    pub runs: Vec<&'a CellResult>,
}

impl<'a> Group<'a> {
    /// The median over the repeats of a number of the result.
    pub(crate) fn num(&self, path: &str) -> Option<f64> {
        Spread::of(self.per_seed(path).into_values().collect()).map(|s| s.median)
    }

    /// A number of each repeat, by seed.
    pub(crate) fn per_seed(&self, path: &str) -> BTreeMap<u64, f64> {
        self.runs
            .iter()
            .filter_map(|r| Some((r.seed, r.num(path)?)))
            .collect()
    }

    /// A parameter of the cell (the same in every repeat).
    pub(crate) fn param(&self, key: &str) -> Option<&'a Value> {
        self.runs.first().and_then(|r| r.param(key))
    }

    /// `None` when every repeat was bound by one of `expected`; else why not (for a verdict
    /// that is withheld).
    pub(crate) fn out_of_regime(&self, expected: &[&str], label: &str) -> Option<String> {
        self.off_regime(label, &expected.join(" or "), |r| {
            expected.contains(&r.result["regime"]["bottleneck"].as_str().unwrap_or("?"))
        })
    }

    /// `None` when `in_regime` holds for every repeat; else which bottlenecks the others had.
    pub(crate) fn off_regime(
        &self,
        label: &str,
        expected: &str,
        in_regime: impl Fn(&CellResult) -> bool,
    ) -> Option<String> {
        let off: Vec<&str> = self
            .runs
            .iter()
            .filter(|r| !in_regime(r))
            .map(|r| r.result["regime"]["bottleneck"].as_str().unwrap_or("?"))
            .collect();
        (!off.is_empty()).then(|| {
            format!(
                "{label} was bound by {} in {} of {} repeats where the seed's was bound by {expected}",
                dedup(&off).join("/"),
                off.len(),
                self.runs.len(),
            )
        })
    }
}

fn dedup<'s>(v: &[&'s str]) -> Vec<&'s str> {
    let mut out: Vec<&str> = v.to_vec();
    out.sort_unstable();
    out.dedup();
    out
}

/// Median, min and max of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    /// `None` for no finite values.
    pub(crate) fn of(mut v: Vec<f64>) -> Option<Self> {
        v.retain(|x| x.is_finite());
        let median = median(&mut v)?;
        Some(Self {
            median,
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        })
    }

    /// `1.57x (1.41–1.71)`, or `1.57x` for one repeat.
    pub(crate) fn times(&self) -> String {
        self.fmt(|v| format!("{v:.2}x"))
    }

    /// `11.2 % (9.8–12.0)`, for a fraction.
    pub(crate) fn percent(&self) -> String {
        self.fmt(|v| format!("{:.1} %", v * 100.0))
    }

    /// The median, then the range in brackets when there is more than one value.
    pub(crate) fn fmt(&self, f: impl Fn(f64) -> String) -> String {
        if self.n > 1 {
            format!("{} ({}–{})", f(self.median), f(self.min), f(self.max))
        } else {
            f(self.median)
        }
    }
}

/// `f(a, b)` per seed that both groups ran, as a spread (`a / b` for a ratio).
pub(crate) fn paired(
    a: Option<&Group>,
    b: Option<&Group>,
    path: &str,
    f: impl Fn(f64, f64) -> Option<f64>,
) -> Option<Spread> {
    let (a, b) = (a?.per_seed(path), b?.per_seed(path));
    Spread::of(
        a.iter()
            .filter_map(|(seed, x)| f(*x, *b.get(seed)?))
            .collect(),
    )
}

/// `a / b` per seed.
pub(crate) fn ratio(a: Option<&Group>, b: Option<&Group>, path: &str) -> Option<Spread> {
    paired(a, b, path, |x, y| (y > 0.0).then(|| x / y))
}

/// The median (of an even count, the mean of the middle two; not the upper one, which with
/// two cells would report the larger figure). `None` for no values.
pub(crate) fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (n > 0).then(|| {
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_keeps_the_median_and_the_ends() {
        let s = Spread::of(vec![1.4, 1.7, f64::NAN, 1.5]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (1.5, 1.4, 1.7, 3));
        assert_eq!(s.times(), "1.50x (1.40x–1.70x)");
        assert!(Spread::of(vec![]).is_none());
    }
}

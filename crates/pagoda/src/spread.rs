//! A median with its spread over repeated measurements: `pagoda reproduce` (one repeat per
//! seed) and `pagoda bench compare` (one per repeat) both report numbers this way, so they
//! share one type and its formats.

use serde::Serialize;

/// Median, min and max of repeated measurements. Serialised as `median`, `min`, `max` only
/// (the JSON `bench compare` publishes has no count).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    #[serde(skip)]
    pub(crate) n: usize,
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

    /// `1.57x (1.41–1.71)` with `digits` decimals: the unit after the median only, and the
    /// range even for one repeat (the format `bench compare` publishes).
    pub(crate) fn with_range(&self, digits: usize, unit: &str) -> String {
        format!(
            "{:.digits$}{unit} ({:.digits$}–{:.digits$})",
            self.median, self.min, self.max
        )
    }

    /// How pagoda stands when `self` is pagoda/peer over the repeats: ahead only when even
    /// the worst repeat is above 1, behind only when even the best is below 1.
    pub(crate) fn verdict(&self) -> &'static str {
        if self.min > 1.0 {
            "ahead"
        } else if self.max < 1.0 {
            "behind"
        } else {
            "even"
        }
    }
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
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_spread_keeps_the_median_and_the_ends() {
        let s = Spread::of(vec![1.4, 1.7, f64::NAN, 1.5]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (1.5, 1.4, 1.7, 3));
        assert_eq!(s.times(), "1.50x (1.40x–1.70x)");
        assert_eq!(s.with_range(2, "x"), "1.50x (1.40–1.70)");
        assert!(Spread::of(vec![]).is_none());
    }

    #[test]
    fn median_and_spread_of_odd_and_even_counts() {
        let s = Spread::of(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(vec![4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        // One repeat: `fmt` drops the range, `with_range` keeps it.
        let one = Spread::of(vec![1.2]).unwrap();
        assert_eq!(
            (one.times(), one.with_range(2, "x")),
            ("1.20x".into(), "1.20x (1.20–1.20)".into())
        );
    }

    #[test]
    fn ahead_only_when_the_low_end_is_above_one() {
        let v = |min, max| {
            Spread {
                median: (min + max) / 2.0,
                min,
                max,
                n: 2,
            }
            .verdict()
        };
        assert_eq!(v(1.01, 1.5), "ahead");
        assert_eq!(v(0.99, 1.5), "even");
        assert_eq!(v(1.0, 1.5), "even");
        assert_eq!(v(0.5, 0.99), "behind");
        assert_eq!(v(0.5, 1.0), "even");
    }

    #[test]
    fn only_median_min_and_max_are_serialised() {
        let s = Spread::of(vec![1.0, 2.0]).unwrap();
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"median":1.5,"min":1.0,"max":2.0}"#
        );
    }
}

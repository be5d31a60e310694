//! Range-bound helpers shared by scans and the version store.

use std::ops::Bound;

/// A key of one table: (table id, key).
pub(crate) type WKey = (u32, Vec<u8>);

pub(crate) fn tuple_bounds(
    table: u32,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
) -> (Bound<WKey>, Bound<WKey>) {
    let lo = match lo {
        Bound::Included(k) => Bound::Included((table, k.to_vec())),
        Bound::Excluded(k) => Bound::Excluded((table, k.to_vec())),
        Bound::Unbounded => Bound::Included((table, Vec::new())),
    };
    let hi = match hi {
        Bound::Included(k) => Bound::Included((table, k.to_vec())),
        Bound::Excluded(k) => Bound::Excluded((table, k.to_vec())),
        Bound::Unbounded => Bound::Excluded((table + 1, Vec::new())),
    };
    (lo, hi)
}

/// Whether `(lo, hi)` is a range `BTreeMap::range` accepts and that may hold keys.
pub(crate) fn range_ok<T: Ord>(lo: &Bound<T>, hi: &Bound<T>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a), Bound::Excluded(b)) | (Bound::Excluded(a), Bound::Included(b)) => {
            a < b
        }
        (Bound::Excluded(a), Bound::Excluded(b)) => a < b,
        _ => true,
    }
}

pub(crate) fn max_lower(a: Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    match (&a, b) {
        (_, Bound::Unbounded) => a,
        (Bound::Unbounded, _) => b.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if x > y || (x == y && matches!(a, Bound::Excluded(_))) {
                a
            } else {
                b.clone()
            }
        }
    }
}

pub(crate) fn min_upper(a: Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    match (&a, b) {
        (_, Bound::Unbounded) => a,
        (Bound::Unbounded, _) => b.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if x < y || (x == y && matches!(a, Bound::Excluded(_))) {
                a
            } else {
                b.clone()
            }
        }
    }
}

pub(crate) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

pub(crate) fn in_range(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

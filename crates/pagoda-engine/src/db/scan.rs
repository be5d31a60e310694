//! Range scans merging the tree, the version chains and the transaction's own writes.

use super::catalog::TableInfo;
use super::txn::{Opened, Txn};
use crate::bounds::{as_ref, in_range, max_lower, min_upper, range_ok, tuple_bounds};
use crate::btree;
use crate::error::{Error, Result};
use crate::mvcc::Value;
use std::collections::{BTreeMap, VecDeque};
use std::ops::{Bound, RangeBounds};

pub(super) enum Src {
    Tree(Result<Vec<u8>>),
    Value(Value),
    Own(Option<Vec<u8>>),
}

/// An iterator over a range of a table inside a transaction's snapshot (with its own writes).
/// Reads one leaf at a time.
#[derive(Debug)]
pub struct Scan<'t> {
    txn: &'t Txn<'t>,
    /// The table's name (for errors).
    pub(super) name: String,
    pub(super) table: u32,
    pub(super) root: u64,
    pub(super) lo: Bound<Vec<u8>>,
    pub(super) hi: Bound<Vec<u8>>,
    pub(super) reverse: bool,
    pub(super) cursor: Bound<Vec<u8>>,
    pub(super) buf: VecDeque<(Vec<u8>, Vec<u8>)>,
    pub(super) done: bool,
}

// A transaction's scans are made here, not in `txn.rs`: a `Scan` borrows its `Txn`, so the
// cursor knows the transaction and the transaction need not know the cursor.
impl<'db> Txn<'db> {
    pub(super) fn scan<R: RangeBounds<[u8]>>(
        &self,
        t: &Opened,
        range: R,
        reverse: bool,
    ) -> Scan<'_> {
        let own = |b: Bound<&[u8]>| match b {
            Bound::Included(k) => Bound::Included(k.to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let lo = own(range.start_bound());
        let hi = own(range.end_bound());
        let cursor = if reverse { hi.clone() } else { lo.clone() };
        let done = !range_ok(&lo, &hi);
        Scan {
            txn: self,
            name: t.name.to_string(),
            table: t.info.id,
            root: t.info.root,
            lo,
            hi,
            reverse,
            cursor,
            buf: VecDeque::new(),
            done,
        }
    }
}

impl Scan<'_> {
    pub(super) fn fill(&mut self) -> Result<()> {
        let pool = &self.txn.db.inner.pool;
        let live = || {
            let t = TableInfo {
                id: self.table,
                root: self.root,
            };
            self.txn.db.still_live(&self.name, t)
        };
        let b = match btree::batch(pool, self.root, &self.cursor, self.reverse) {
            Ok(b) => b,
            Err(e) => {
                // A dropped table's pages may hold anything now: say it was dropped. A device
                // error is the device's, dropped table or not: it must reach the caller.
                if !matches!(e, Error::Device(_)) {
                    live()?;
                }
                return Err(e);
            }
        };
        let (clo, chi) = if self.reverse {
            (
                b.fence.clone().map_or(Bound::Unbounded, Bound::Included),
                self.cursor.clone(),
            )
        } else {
            (
                self.cursor.clone(),
                b.fence.clone().map_or(Bound::Unbounded, Bound::Excluded),
            )
        };
        let lo = max_lower(clo, &self.lo);
        let hi = min_upper(chi, &self.hi);
        if range_ok(&lo, &hi) {
            let mut merged: BTreeMap<Vec<u8>, Src> = BTreeMap::new();
            // Values are loaded before the version chains are read: an overwrite that frees
            // an overflow chain we are reading has pushed its version by then, and overrides.
            for (k, v) in b.entries {
                if in_range(&k, &lo, &hi) {
                    let loaded = btree::load_value(pool, &v);
                    merged.insert(k, Src::Tree(loaded));
                }
            }
            live()?;
            for (k, v) in self.txn.db.inner.mvcc.read_range(
                self.table,
                as_ref(&lo),
                as_ref(&hi),
                self.txn.snapshot,
            ) {
                merged.insert(k, Src::Value(v));
            }
            let (tlo, thi) = tuple_bounds(self.table, as_ref(&lo), as_ref(&hi));
            if range_ok(&tlo, &thi) {
                for ((_, k), v) in self.txn.writes.borrow().range((tlo, thi)) {
                    merged.insert(k.clone(), Src::Own(v.as_deref().map(<[u8]>::to_vec)));
                }
            }
            let mut out = Vec::with_capacity(merged.len());
            for (k, src) in merged {
                let v = match src {
                    Src::Tree(loaded) => Some(loaded?),
                    Src::Value(v) => v.map(|b| b.to_vec()),
                    Src::Own(v) => v,
                };
                if let Some(v) = v {
                    out.push((k, v));
                }
            }
            if self.reverse {
                out.reverse();
            }
            self.buf.extend(out);
        }
        self.advance(b.fence);
        Ok(())
    }

    /// Moves the cursor past the leaf just read (whose fence is `fence`), or ends the scan
    /// at the last leaf or past the range's far bound.
    fn advance(&mut self, fence: Option<Vec<u8>>) {
        match fence {
            None => self.done = true,
            Some(f) => {
                if self.reverse {
                    let below = match &self.lo {
                        Bound::Included(l) | Bound::Excluded(l) => f <= *l,
                        Bound::Unbounded => false,
                    };
                    if below {
                        self.done = true;
                    } else {
                        self.cursor = Bound::Excluded(f);
                    }
                } else {
                    let beyond = match &self.hi {
                        Bound::Included(h) => f > *h,
                        Bound::Excluded(h) => f >= *h,
                        Bound::Unbounded => false,
                    };
                    if beyond {
                        self.done = true;
                    } else {
                        self.cursor = Bound::Included(f);
                    }
                }
            }
        }
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(x) = self.buf.pop_front() {
                return Some(Ok(x));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.fill() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}

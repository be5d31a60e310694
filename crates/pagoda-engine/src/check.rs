//! The paranoid check: walks every tree and the free list and verifies what the engine relies
//! on but never re-reads as a whole — key order and separator ranges, equal leaf depth,
//! overflow chain lengths, and that no page is both reachable twice or both in a tree and free.
//! Run after recovery with [`crate::DbOptions::paranoid`], or any time with
//! [`crate::Db::check`].

use crate::buffer::Pool;
use crate::error::{Error, Result};
use crate::format::{Key, Node, Val};
use std::collections::HashSet;

/// What [`crate::Db::check`] walked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    /// Trees walked (the catalog included).
    pub trees: u64,
    /// Pages reached (tree and overflow pages).
    pub pages: u64,
    /// Leaf entries.
    pub entries: u64,
    /// Pages on the free list.
    pub free_pages: u64,
    /// Deepest tree (levels).
    pub max_depth: u64,
    /// Valid flash-cache slots compared with the data device (0 without a flash cache).
    pub flash_slots_checked: u64,
    /// Of those, slots older than the data device's copy of their page: a read would have
    /// served a stale version. Always 0 in a correct engine.
    pub flash_stale_slots: u64,
}

/// Walks the trees at `roots` and the free list of the meta page.
pub(crate) fn check(pool: &Pool, meta_page: u64, roots: &[u64]) -> Result<CheckReport> {
    let meta = match &pool.read(meta_page)?.node {
        Node::Meta(m) => m.clone(),
        _ => {
            return Err(Error::corrupt(
                meta_page,
                "the meta page is not a meta page",
            ))
        }
    };
    let mut c = Checker {
        pool,
        next_page: meta.next_page,
        seen: HashSet::new(),
        report: CheckReport::default(),
    };
    for &pid in &meta.free {
        c.claim(pid, "free list")?;
    }
    c.report.free_pages = meta.free.len() as u64;
    // Trunk pages hold the rest of the free list; each is itself free.
    let mut trunk = meta.free_trunk;
    while trunk != 0 {
        c.claim(trunk, "free-list trunk chain")?;
        let Node::Trunk { next, free } = &pool.read(trunk)?.node else {
            return Err(Error::corrupt(
                trunk,
                "the free-list chain reaches a non-trunk page",
            ));
        };
        for &pid in free {
            c.claim(pid, "free-list trunk")?;
        }
        c.report.free_pages += 1 + free.len() as u64;
        trunk = *next;
    }
    for &root in roots {
        c.report.trees += 1;
        let mut leaf_depth = None;
        c.node(root, 1, None, None, &mut leaf_depth)?;
        c.report.max_depth = c.report.max_depth.max(leaf_depth.unwrap_or(0));
    }
    c.report.pages = c.seen.len() as u64 - c.report.free_pages;
    Ok(c.report)
}

struct Checker<'a> {
    pool: &'a Pool,
    next_page: u64,
    seen: HashSet<u64>,
    report: CheckReport,
}

impl Checker<'_> {
    /// Marks `pid` as used by `what`; a page used twice is corruption.
    fn claim(&mut self, pid: u64, what: &str) -> Result<()> {
        if pid >= self.next_page {
            return Err(Error::corrupt(
                pid,
                format!(
                    "{what} names page {pid}, beyond the allocated {} pages",
                    self.next_page
                ),
            ));
        }
        if !self.seen.insert(pid) {
            return Err(Error::corrupt(
                pid,
                format!("page {pid} is reached twice (last from the {what})"),
            ));
        }
        Ok(())
    }

    /// Checks the subtree at `pid`: its keys lie in `[lo, hi)`.
    fn node(
        &mut self,
        pid: u64,
        depth: u64,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        leaf_depth: &mut Option<u64>,
    ) -> Result<()> {
        self.claim(pid, "tree")?;
        let node = self.pool.read(pid)?.node.clone();
        let in_range = |k: &[u8]| lo.is_none_or(|l| k >= l) && hi.is_none_or(|h| k < h);
        match node {
            Node::Internal { keys, children } => {
                if children.len() != keys.len() + 1 {
                    return Err(Error::corrupt(
                        pid,
                        format!("{} separators but {} children", keys.len(), children.len()),
                    ));
                }
                if keys.windows(2).any(|w| w[0] >= w[1]) || !keys.iter().all(|k| in_range(k)) {
                    return Err(Error::corrupt(
                        pid,
                        "separators out of order or outside the parent's range",
                    ));
                }
                for (i, &child) in children.iter().enumerate() {
                    let clo = if i == 0 {
                        lo
                    } else {
                        Some(keys[i - 1].as_slice())
                    };
                    let chi = keys.get(i).map(Key::as_slice).or(hi);
                    self.node(child, depth + 1, clo, chi, leaf_depth)?;
                }
            }
            Node::Leaf(entries) => {
                if *leaf_depth.get_or_insert(depth) != depth {
                    return Err(Error::corrupt(
                        pid,
                        format!("leaf at depth {depth}, others at {leaf_depth:?}"),
                    ));
                }
                if entries.windows(2).any(|w| w[0].0 >= w[1].0)
                    || !entries.iter().all(|(k, _)| in_range(k))
                {
                    return Err(Error::corrupt(
                        pid,
                        "leaf keys out of order or outside the parent's range",
                    ));
                }
                self.report.entries += entries.len() as u64;
                for (_, v) in &entries {
                    if let Val::Overflow { first, len } = v {
                        self.overflow(*first, *len)?;
                    }
                }
            }
            _ => return Err(Error::corrupt(pid, "a tree points at a non-tree page")),
        }
        Ok(())
    }

    fn overflow(&mut self, first: u64, len: u64) -> Result<()> {
        let mut pid = first;
        let mut held = 0u64;
        while pid != 0 {
            self.claim(pid, "overflow chain")?;
            let Node::Overflow { next, data } = &self.pool.read(pid)?.node else {
                return Err(Error::corrupt(
                    pid,
                    "an overflow chain reaches a non-overflow page",
                ));
            };
            held += data.len() as u64;
            pid = *next;
        }
        if held != len {
            return Err(Error::corrupt(
                first,
                format!("overflow chain holds {held} of {len} bytes"),
            ));
        }
        Ok(())
    }
}

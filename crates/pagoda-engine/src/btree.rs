//! B+trees over the buffer pool.
//!
//! Concurrency: commits are applied by one writer at a time (the commit critical section), so
//! the tree has a single writer and many readers. Readers descend with latch coupling (shared
//! latch on the child before releasing the parent). The writer changes a leaf in place under
//! its exclusive latch when the change fits; a split or merge latches the whole root-to-leaf
//! path exclusively top-down first, so no reader can be between a parent and a child being
//! restructured. The root page of a tree never moves (a root split moves its contents into two
//! new children), so table roots in the catalog are stable.
//!
//! Redo: every page the writer changes is recorded in `touched` (stamped with the commit LSN);
//! pages changed structurally (split, merge, allocation, overflow, meta) are also recorded in
//! `imaged` and their final images go into the commit record.

use crate::buffer::{LeafUndo, Pool, WritePage};
use crate::error::{Error, Result};
use crate::format::{leaf_entry_len, Key, Node, Val, PAGE_HEADER};
use std::collections::BTreeSet;
use std::ops::Bound;

mod merge;
mod path;
mod split;
#[cfg(test)]
mod tests;

pub(crate) use path::lookup_pages;
use split::split_path;

/// Longest key in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// Largest payload of a page of `page_size` bytes.
pub fn payload_max(page_size: usize) -> usize {
    page_size - PAGE_HEADER
}

/// Largest value stored inline in a leaf: a quarter page, or less for 4 KiB pages so that two
/// maximal entries always fit in a leaf. Longer values go to overflow pages.
pub fn inline_max(page_size: usize) -> usize {
    (page_size / 4).min((payload_max(page_size) - 4) / 2 - (2 + MAX_KEY_LEN + 5))
}

/// The number of separators `<= key` (the child to descend to). A binary search over a large
/// internal node waits for one cache miss per probe; this one asks for both of the next
/// step's candidates while it compares, so consecutive misses overlap.
fn child_index(keys: &[Key], key: &[u8]) -> usize {
    if keys.is_empty() {
        return 0;
    }
    let mut base = 0;
    let mut size = keys.len();
    while size > 1 {
        let half = size / 2;
        let next = (size - half) / 2;
        prefetch(std::slice::from_ref(&keys[base + next]));
        prefetch(std::slice::from_ref(&keys[base + half + next]));
        let le = key_cmp(&keys[base + half], key).is_le();
        base = std::hint::select_unpredictable(le, base + half, base);
        size -= half;
    }
    base + usize::from(key_cmp(&keys[base], key).is_le())
}

/// Key order (bytewise, as `[u8]::cmp`), eight bytes at a time: a descent compares the key with
/// about ten separators per level, and short keys (16 bytes in the peers' workload) compare
/// faster as big-endian words than through a `memcmp` call.
#[inline]
pub(crate) fn key_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let word = |c: &[u8]| u64::from_be_bytes(c.try_into().unwrap_or([0; 8]));
    let mut done = 0;
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let (x, y) = (word(x), word(y));
        if x != y {
            return x.cmp(&y);
        }
        done += 8;
    }
    a[done..].cmp(&b[done..])
}

pub(crate) fn corrupt_kind(pid: u64, want: &str) -> Error {
    Error::corrupt(pid, format!("expected a {want} page in the tree"))
}

/// Levels no real tree reaches (a fanout of two over 2^64 pages): a descent past it follows a
/// cycle, which a stale page (a lost write) can close by pointing back up.
const MAX_LEVELS: usize = 64;

/// Counts one more level of a descent now at `pid`; the error when the descent went past
/// [`MAX_LEVELS`] (else it would loop forever).
pub(crate) fn descend(levels: &mut usize, pid: u64) -> Result<()> {
    *levels += 1;
    if *levels > MAX_LEVELS {
        return Err(Error::corrupt(
            pid,
            format!(
                "the tree goes on past {MAX_LEVELS} levels here: its pages point back up \
                 (a cycle, e.g. a stale page)"
            ),
        ));
    }
    Ok(())
}

/// Finds `key`'s leaf entry (latch coupling).
pub fn get(pool: &Pool, root: u64, key: &[u8]) -> Result<Option<Val>> {
    let mut page = pool.read(root)?;
    let mut levels = 0;
    loop {
        descend(&mut levels, page.id)?;
        let next = match &page.node {
            Node::Internal { keys, children } => children[child_index(keys, key)],
            Node::Leaf(es) => {
                prefetch(es);
                return Ok(es
                    .binary_search_by(|(k, _)| key_cmp(k, key))
                    .ok()
                    .map(|i| es[i].1.clone()));
            }
            _ => return Err(corrupt_kind(page.id, "tree")),
        };
        let child = pool.read(next)?;
        page = child;
    }
}

/// Asks the CPU for every cache line of a leaf's entries at once: in a leaf that is not in
/// the CPU cache (a large working set) each probe of the binary search is otherwise a miss
/// that waits for the one before.
#[inline]
fn prefetch<T>(es: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = es.as_ptr().cast::<i8>();
        for off in (0..std::mem::size_of_val(es)).step_by(64) {
            // SAFETY: a prefetch is only a hint: it never faults and reads nothing back, and
            // the address is inside the slice.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
        }
    }
}

/// Levels of the tree at `root` (1 = the root is a leaf), along its leftmost path.
pub fn depth(pool: &Pool, root: u64) -> Result<usize> {
    let mut pid = root;
    let mut levels = 1;
    let mut walked = 0;
    loop {
        descend(&mut walked, pid)?;
        let next = match &pool.read(pid)?.node {
            Node::Internal { children, .. } => children[0],
            Node::Leaf(_) => return Ok(levels),
            _ => return Err(corrupt_kind(pid, "tree")),
        };
        pid = next;
        levels += 1;
    }
}

/// [`load_value`] of an owned value: an inline value is moved out, not copied again (a point
/// read already copied it out of the leaf).
pub fn into_value(pool: &Pool, val: Val) -> Result<Vec<u8>> {
    match val {
        Val::Inline(v) => Ok(v),
        other => load_value(pool, &other),
    }
}

/// Reads a value (following overflow pages).
pub fn load_value(pool: &Pool, val: &Val) -> Result<Vec<u8>> {
    match val {
        Val::Inline(v) => Ok(v.clone()),
        Val::Overflow { first, len } => {
            let mut out = Vec::with_capacity(*len as usize);
            let mut pid = *first;
            while pid != 0 && (out.len() as u64) < *len {
                let p = pool.read(pid)?;
                let Node::Overflow { next, data } = &p.node else {
                    return Err(corrupt_kind(pid, "overflow"));
                };
                out.extend_from_slice(data);
                pid = *next;
            }
            if out.len() as u64 != *len {
                return Err(Error::corrupt(
                    *first,
                    format!("overflow chain holds {} of {len} bytes", out.len()),
                ));
            }
            Ok(out)
        }
    }
}

/// One batch of a range scan: the entries of one leaf inside the cursor bound, and the
/// interval of keys the batch covers completely.
#[derive(Debug)]
pub struct Batch {
    /// Entries in key order.
    pub entries: Vec<(Vec<u8>, Val)>,
    /// Forward: the leaf's upper fence (next cursor, inclusive); reverse: lower fence (next
    /// cursor, exclusive). `None` = no more leaves.
    pub fence: Option<Vec<u8>>,
}

/// Collects the leaf for a scan step. Forward: keys `>= / >` the cursor; reverse: keys
/// `<= / <` the cursor.
pub fn batch(pool: &Pool, root: u64, cursor: &Bound<Vec<u8>>, reverse: bool) -> Result<Batch> {
    let mut page = pool.read(root)?;
    let mut fence: Option<Vec<u8>> = None;
    let mut levels = 0;
    loop {
        descend(&mut levels, page.id)?;
        let next = match &page.node {
            Node::Internal { keys, children } => {
                let i = match (cursor, reverse) {
                    (Bound::Unbounded, false) => 0,
                    (Bound::Unbounded, true) => keys.len(),
                    (Bound::Included(k), _) => child_index(keys, k),
                    (Bound::Excluded(k), false) => child_index(keys, k),
                    (Bound::Excluded(k), true) => {
                        keys.partition_point(|s| s.as_slice() < k.as_slice())
                    }
                };
                if reverse {
                    if i > 0 {
                        fence = Some(keys[i - 1].to_vec());
                    }
                } else if i < keys.len() {
                    fence = Some(keys[i].to_vec());
                }
                children[i]
            }
            Node::Leaf(es) => {
                let entries = es
                    .iter()
                    .filter(|(k, _)| match (cursor, reverse) {
                        (Bound::Unbounded, _) => true,
                        (Bound::Included(c), false) => k.as_slice() >= c.as_slice(),
                        (Bound::Excluded(c), false) => k.as_slice() > c.as_slice(),
                        (Bound::Included(c), true) => k.as_slice() <= c.as_slice(),
                        (Bound::Excluded(c), true) => k.as_slice() < c.as_slice(),
                    })
                    .map(|(k, v)| (k.to_vec(), v.clone()))
                    .collect();
                return Ok(Batch { entries, fence });
            }
            _ => return Err(corrupt_kind(page.id, "tree")),
        };
        let child = pool.read(next)?;
        page = child;
    }
}

/// The writer's view of the trees during one commit (or one recovery step).
#[derive(Debug)]
pub struct Apply<'a> {
    /// The pool.
    pub pool: &'a Pool,
    /// The meta page id.
    pub meta: u64,
    /// Pages changed.
    pub touched: BTreeSet<u64>,
    /// Pages changed structurally (their images go to the log).
    pub imaged: BTreeSet<u64>,
    /// Pages freed.
    pub freed: BTreeSet<u64>,
    /// Recovery: mark pages with this LSN instead of "in progress".
    pub recovery_lsn: Option<u64>,
    /// A commit: the overflow pages it frees are held for older snapshots (`freelist.rs`).
    pub hold: Option<u64>,
    /// The leaf the last [`Apply::put`] or [`Apply::delete`] found for its key, before any
    /// split or merge: the key ends in an imaged leaf exactly when this leaf is imaged or
    /// freed (a leaf split later in the same commit is imaged with the page it split into;
    /// a merge images the sibling that takes a freed leaf's keys), so a commit learns it
    /// without descending again.
    pub last_leaf: u64,
}

impl<'a> Apply<'a> {
    /// A fresh apply context.
    pub fn new(pool: &'a Pool, meta: u64) -> Self {
        Self {
            pool,
            meta,
            touched: BTreeSet::new(),
            imaged: BTreeSet::new(),
            freed: BTreeSet::new(),
            recovery_lsn: None,
            hold: None,
            last_leaf: 0,
        }
    }

    pub(crate) fn mark(&mut self, p: &mut WritePage<'_>, image: bool) {
        match self.recovery_lsn {
            // Recovery too keeps the page from being written until every operation of the
            // record is applied (`Pool::stamp`): a page written with the record's LSN but only
            // part of its operations would make the next recovery skip the rest.
            Some(l) => {
                p.lsn = p.lsn.max(l);
                if crate::probe::is(
                    self.pool.sabotage(),
                    crate::probe::Sabotage::RedoPartialWrites,
                ) {
                    p.modified_at(l);
                } else {
                    p.modified();
                }
            }
            None => p.modified(),
        }
        self.touched.insert(p.id);
        if image {
            self.imaged.insert(p.id);
        }
    }

    pub(crate) fn payload_max(&self) -> usize {
        payload_max(self.pool.page_size())
    }

    /// Allocates a table id.
    pub fn next_table_id(&mut self) -> Result<u32> {
        let mut meta = self.pool.write(self.meta)?;
        let Node::Meta(m) = &mut meta.node else {
            return Err(corrupt_kind(self.meta, "meta"));
        };
        let id = m.next_table;
        m.next_table += 1;
        self.mark(&mut meta, true);
        Ok(id)
    }

    /// Stores a large value in a chain of overflow pages.
    pub fn write_overflow(&mut self, data: &[u8]) -> Result<Val> {
        let cap = self.payload_max() - 12;
        let chunks: Vec<&[u8]> = data.chunks(cap).collect();
        let mut pids = Vec::with_capacity(chunks.len());
        for _ in &chunks {
            pids.push(self.alloc(Node::Overflow {
                next: 0,
                data: Vec::new(),
            })?);
        }
        for (i, c) in chunks.iter().enumerate() {
            let mut p = self.pool.write(pids[i])?;
            p.node = Node::Overflow {
                next: pids.get(i + 1).copied().unwrap_or(0),
                data: c.to_vec(),
            };
            self.mark(&mut p, true);
        }
        Ok(Val::Overflow {
            first: pids[0],
            len: data.len() as u64,
        })
    }

    fn leaf_path(&self, root: u64, key: &[u8]) -> Result<Vec<(u64, usize)>> {
        let mut path = Vec::new();
        let mut pid = root;
        loop {
            descend(&mut path.len(), pid)?;
            let p = self.pool.read(pid)?;
            match &p.node {
                Node::Internal { keys, children } => {
                    let i = child_index(keys, key);
                    path.push((pid, i));
                    pid = children[i];
                }
                Node::Leaf(_) => {
                    path.push((pid, usize::MAX));
                    return Ok(path);
                }
                _ => return Err(corrupt_kind(pid, "tree")),
            }
        }
    }

    /// Sets `key` to `val`; returns the previous value.
    pub fn put(&mut self, root: u64, key: &[u8], val: Val) -> Result<Option<Val>> {
        let path = self.leaf_path(root, key)?;
        let leaf = path[path.len() - 1].0;
        self.last_leaf = leaf;
        let max = self.payload_max();
        {
            // Changed in place when it fits: the undo journal then keeps the entry, not a
            // copy of the page (a split below latches the path with full copies).
            let mut p = self.pool.write_in_place(leaf)?;
            let Node::Leaf(es) = &mut p.node else {
                return Err(corrupt_kind(leaf, "leaf"));
            };
            let pos = es.binary_search_by(|(k, _)| key_cmp(k, key));
            let old_len = pos.map_or(0, |i| leaf_entry_len(&es[i].0, &es[i].1));
            let size = p.node.payload_len() - old_len + leaf_entry_len(key, &val);
            if size <= max {
                let undo = match (pos, &p.node) {
                    (Ok(i), Node::Leaf(es)) => LeafUndo::Restore {
                        idx: i,
                        val: es[i].1.clone(),
                    },
                    (Err(i), _) => LeafUndo::Remove { idx: i },
                    _ => return Err(corrupt_kind(leaf, "leaf")),
                };
                self.pool.note_leaf_undo(&p, undo);
                let Node::Leaf(es) = &mut p.node else {
                    return Err(corrupt_kind(leaf, "leaf"));
                };
                let old = match pos {
                    Ok(i) => Some(std::mem::replace(&mut es[i].1, val)),
                    Err(i) => {
                        es.insert(i, (Key::from_slice(key), val));
                        None
                    }
                };
                self.mark(&mut p, false);
                return Ok(old);
            }
        }
        // Split: latch the whole path top-down, then restructure copies of the nodes that
        // change (the leaf, and each parent a split reaches) and put them in place only once
        // every new page is, so that a failure (no free page, a full buffer) leaves every node
        // as it was. Only the displaced nodes go to the undo journal: no page is copied twice.
        let mut pages = Vec::with_capacity(path.len());
        for (pid, _) in &path {
            pages.push(self.pool.write_in_place(*pid)?);
        }
        let last = path.len() - 1;
        let mut nodes: Vec<Option<Node>> = vec![None; path.len()];
        let mut leaf_node = pages[last].node.clone();
        let Node::Leaf(es) = &mut leaf_node else {
            return Err(corrupt_kind(leaf, "leaf"));
        };
        let mut appended = false;
        let old = match es.binary_search_by(|(k, _)| key_cmp(k, key)) {
            Ok(i) => Some(std::mem::replace(&mut es[i].1, val)),
            Err(i) => {
                appended = i == es.len();
                es.insert(i, (Key::from_slice(key), val));
                None
            }
        };
        nodes[last] = Some(leaf_node);
        // New pages get placeholder ids (counted), then the real ids once reserved.
        let mut need = 0u64;
        let (mut new, top, sep_in_place) = split_path(
            &mut nodes,
            &|level| &pages[level].node,
            &path,
            max,
            appended,
            || {
                need += 1;
                PLACEHOLDER + need - 1
            },
        )?;
        let ids = self.reserve(need as usize)?;
        let real = |id: u64| {
            if id >= PLACEHOLDER {
                ids[(id - PLACEHOLDER) as usize]
            } else {
                id
            }
        };
        for node in nodes
            .iter_mut()
            .flatten()
            .chain(new.iter_mut().map(|(_, n)| n))
        {
            if let Node::Internal { children, .. } = node {
                for c in children.iter_mut() {
                    *c = real(*c);
                }
            }
        }
        for (pid, node) in new {
            self.place(real(pid), node)?;
        }
        for (level, page) in pages.iter_mut().enumerate().skip(top) {
            match (nodes[level].take(), &sep_in_place) {
                (Some(node), _) => {
                    let displaced = std::mem::replace(&mut page.node, node);
                    self.pool.note_displaced(page, displaced);
                }
                (None, Some((l, ci, sep, r))) if *l == level => {
                    // The parent had room: the separator goes in place, journaled as such.
                    let Node::Internal { keys, .. } = &page.node else {
                        return Err(corrupt_kind(page.id, "internal"));
                    };
                    if *ci > keys.len() {
                        return Err(corrupt_kind(page.id, "internal"));
                    }
                    self.pool
                        .note_leaf_undo(page, LeafUndo::RemoveSeparator { idx: *ci });
                    let Node::Internal { keys, children } = &mut page.node else {
                        return Err(corrupt_kind(page.id, "internal"));
                    };
                    keys.insert(*ci, sep.clone());
                    children.insert(ci + 1, real(*r));
                }
                _ => {
                    return Err(Error::Internal(format!(
                        "split of page {leaf}: level {level} changed but was not copied"
                    )))
                }
            }
            self.mark(page, true);
        }
        Ok(old)
    }

    /// The LSN of the leaf `key` routes to (redo decides with it, before a record's
    /// operations change any leaf).
    pub fn leaf_lsn(&self, root: u64, key: &[u8]) -> Result<u64> {
        let path = self.leaf_path(root, key)?;
        Ok(self.pool.read(path[path.len() - 1].0)?.lsn)
    }

    /// Applies one logical redo operation.
    pub fn redo_apply(&mut self, root: u64, key: &[u8], val: Option<Val>) -> Result<()> {
        match val {
            Some(v) => self.put(root, key, v).map(|_| ()),
            None => self.delete(root, key).map(|_| ()),
        }
    }

    /// Removes `key`; returns the previous value. Under-full leaves merge with a sibling.
    pub fn delete(&mut self, root: u64, key: &[u8]) -> Result<Option<Val>> {
        let path = self.leaf_path(root, key)?;
        let leaf = path[path.len() - 1].0;
        self.last_leaf = leaf;
        let max = self.payload_max();
        let underfull = {
            let mut p = self.pool.write(leaf)?;
            let Node::Leaf(es) = &mut p.node else {
                return Err(corrupt_kind(leaf, "leaf"));
            };
            let Ok(i) = es.binary_search_by(|(k, _)| key_cmp(k, key)) else {
                return Ok(None);
            };
            let old = es.remove(i).1;
            let under =
                p.node.payload_len() < max / 4 && path.len() > 1 && self.recovery_lsn.is_none();
            self.mark(&mut p, false);
            if !under {
                return Ok(Some(old));
            }
            old
        };
        self.merge_path(&path)?;
        Ok(Some(underfull))
    }

    /// Frees every page of a tree (drop table).
    pub fn drop_tree(&mut self, root: u64) -> Result<()> {
        let mut stack = vec![root];
        while let Some(pid) = stack.pop() {
            let node = self.pool.read(pid)?.node.clone();
            match node {
                Node::Internal { children, .. } => stack.extend(children),
                Node::Leaf(es) => {
                    for (_, v) in &es {
                        self.free_value(v)?;
                    }
                }
                _ => return Err(corrupt_kind(pid, "tree")),
            }
            self.free(pid)?;
        }
        Ok(())
    }

    /// Images of the structurally changed pages (for the commit record).
    pub fn images(&self) -> Result<Vec<(u64, Node)>> {
        let mut out = Vec::with_capacity(self.imaged.len());
        for &pid in &self.imaged {
            if self.freed.contains(&pid) {
                continue;
            }
            out.push((pid, self.pool.read(pid)?.node.clone()));
        }
        Ok(out)
    }
}

/// Page ids handed out for new pages before they are reserved (far above any real page).
const PLACEHOLDER: u64 = 1 << 62;

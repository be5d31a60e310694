//! In-memory undo of a commit that fails half-way (a full device, a full pool): before a
//! running commit first changes a page, the pool keeps the page as it was, so that the whole
//! change can be taken back. Nothing of such a commit is on disk or in the log yet (its pages
//! are "in progress", never written), so restoring memory leaves the database as if the
//! commit had not started, and the error goes back to that transaction alone.

use super::{Pool, WritePage, UNSET};
use crate::error::Result;
use crate::format::{decode_page, is_zero, Node, Page, Val};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// A page as it was before the running commit changed it.
#[derive(Debug)]
pub(super) enum Before {
    /// Resident, with its frame state.
    Page {
        page: Page,
        dirty: bool,
        rec_lsn: u64,
    },
    /// Not in the pool (a page the commit allocated).
    Absent,
}

/// How to take back one in-place change of a node entry: far cheaper than a copy of the whole
/// page (a leaf of 1 KB values is a dozen allocations and 16 KB to copy, an internal node
/// hundreds), and the common case of a commit that updates or inserts a few keys, or of a
/// split whose parent has room for the new separator.
#[derive(Debug)]
pub(crate) enum LeafUndo {
    /// Leaf entry `idx` held `val` before.
    Restore { idx: usize, val: Val },
    /// Leaf entry `idx` was inserted.
    Remove { idx: usize },
    /// Internal separator `idx` and the child after it (`idx + 1`) were inserted.
    RemoveSeparator { idx: usize },
}

/// In-place leaf changes of a page the running commit had not copied before them, with the
/// frame's state before the first one.
#[derive(Debug)]
pub(super) struct LeafLog {
    dirty: bool,
    rec_lsn: u64,
    ops: Vec<LeafUndo>,
}

/// The journal of the running commit (one writer at a time: the commit lock holder).
#[derive(Debug, Default)]
pub(super) struct Journal {
    pub(super) active: bool,
    pub(super) before: HashMap<u64, Before>,
    /// Logical undo of pages changed in place before any copy of them was taken (a copy taken
    /// later holds these changes: rollback restores the copy, then undoes these in reverse).
    pub(super) leaf: HashMap<u64, LeafLog>,
}

impl Pool {
    /// Starts keeping before-images of the pages changed from now on.
    pub fn begin_undo(&self) {
        let mut j = self.journal.lock();
        j.before.clear();
        j.leaf.clear();
        j.active = true;
        self.journaling.store(true, Ordering::Release);
    }

    /// Forgets the before-images: the change stands (its record is about to be logged).
    pub fn end_undo(&self) {
        self.journaling.store(false, Ordering::Release);
        let mut j = self.journal.lock();
        j.active = false;
        j.before.clear();
        j.leaf.clear();
    }

    /// Records `displaced`, the node `w` held before the running commit replaced it (no copy:
    /// the caller hands over what it took out of the page).
    pub(crate) fn note_displaced(&self, w: &WritePage<'_>, displaced: Node) {
        if !self.journaling.load(Ordering::Acquire) {
            return;
        }
        let mut j = self.journal.lock();
        if !j.active || j.before.contains_key(&w.id) {
            return;
        }
        let st = self.frames[w.pin.idx as usize].state.lock();
        let b = Before::Page {
            page: Page {
                id: w.id,
                lsn: w.lsn,
                node: displaced,
            },
            dirty: st.dirty,
            rec_lsn: st.rec_lsn,
        };
        drop(st);
        j.before.insert(w.id, b);
    }

    /// Records how to take back an in-place change of a leaf entry that the caller is about to
    /// make on `w` (latched with [`Pool::write_in_place`]).
    pub(crate) fn note_leaf_undo(&self, w: &WritePage<'_>, op: LeafUndo) {
        if !self.journaling.load(Ordering::Acquire) {
            return;
        }
        let mut j = self.journal.lock();
        if !j.active || j.before.contains_key(&w.id) {
            // No commit to undo, or a copy from before this change covers it.
            return;
        }
        let log = j.leaf.entry(w.id).or_insert_with(|| {
            let st = self.frames[w.pin.idx as usize].state.lock();
            LeafLog {
                dirty: st.dirty,
                rec_lsn: st.rec_lsn,
                ops: Vec::new(),
            }
        });
        log.ops.push(op);
    }

    /// Records `pid`'s state before its first change in this commit.
    pub(super) fn note_before(&self, pid: u64, idx: u32, before: Option<&Page>) {
        let mut j = self.journal.lock();
        if !j.active || j.before.contains_key(&pid) {
            return;
        }
        let b = match before {
            Some(p) => {
                let st = self.frames[idx as usize].state.lock();
                Before::Page {
                    page: p.clone(),
                    dirty: st.dirty,
                    rec_lsn: st.rec_lsn,
                }
            }
            None => Before::Absent,
        };
        j.before.insert(pid, b);
    }

    /// Puts every page the commit changed back as it was; a page that was not resident gets
    /// its durable copy back, clean.
    pub fn rollback_undo(&self) -> Result<()> {
        self.journaling.store(false, Ordering::Release);
        let (before, mut leaf) = {
            let mut j = self.journal.lock();
            j.active = false;
            (std::mem::take(&mut j.before), std::mem::take(&mut j.leaf))
        };
        let mut pids: Vec<u64> = before.keys().chain(leaf.keys()).copied().collect();
        pids.sort_unstable();
        pids.dedup();
        let mut before = before;
        for pid in pids {
            let mut w = self.write(pid)?;
            let idx = w.pin.idx as usize;
            let (mut dirty, mut rec_lsn) = match before.remove(&pid) {
                Some(Before::Page {
                    page,
                    dirty,
                    rec_lsn,
                }) => {
                    *w = page;
                    (dirty, rec_lsn)
                }
                Some(Before::Absent) => {
                    // Not resident before the commit, so its durable copy was its content: put
                    // that back. Kept as the commit left it, a page that was live again after
                    // the rollback (one the commit turned into a free-list trunk, or the head
                    // trunk it allocated) would be served with the wrong node, as clean.
                    // A page never written (zeros, or garbage in a free page) stays as it is:
                    // it is free again, and nothing reads it.
                    let b = self.read_page(pid)?;
                    if !is_zero(&b) {
                        if let Ok(p) = decode_page(&b, pid) {
                            *w = p;
                        }
                    }
                    (false, UNSET)
                }
                None => (false, UNSET),
            };
            if let Some(log) = leaf.remove(&pid) {
                // Changed in place before any copy: undo those changes last-first.
                (dirty, rec_lsn) = (log.dirty, log.rec_lsn);
                for op in log.ops.into_iter().rev() {
                    if !undo_entry(&mut w.node, op) {
                        return Err(crate::error::Error::Internal(format!(
                            "undo of page {pid}: an in-place change names an entry the node \
                             does not have"
                        )));
                    }
                }
            }
            let mut st = self.frames[idx].state.lock();
            self.set_dirty(&mut st, dirty);
            st.rec_lsn = rec_lsn;
            st.in_progress = false;
            // A cleaner that copied the changed page must not mark this state clean.
            st.version += 1;
        }
        Ok(())
    }
}

/// Takes back one in-place change; false if the node does not have the entry it names.
fn undo_entry(node: &mut Node, op: LeafUndo) -> bool {
    match (node, op) {
        (Node::Leaf(es), LeafUndo::Restore { idx, val }) => {
            es.get_mut(idx).map(|e| e.1 = val).is_some()
        }
        (Node::Leaf(es), LeafUndo::Remove { idx }) if idx < es.len() => {
            es.remove(idx);
            true
        }
        (Node::Internal { keys, children }, LeafUndo::RemoveSeparator { idx })
            if idx < keys.len() && idx + 1 < children.len() =>
        {
            keys.remove(idx);
            children.remove(idx + 1);
            true
        }
        _ => false,
    }
}

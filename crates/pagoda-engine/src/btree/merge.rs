//! Merging under-full nodes along a root-to-leaf path (the delete side of [`super::Apply::delete`]).

use super::{corrupt_kind, Apply};
use crate::buffer::WritePage;
use crate::error::Result;
use crate::format::{internal_entry_len, Node};

impl Apply<'_> {
    /// Merges under-full nodes along `path` with a sibling when their contents fit one page;
    /// collapses a root with a single child.
    pub(super) fn merge_path(&mut self, path: &[(u64, usize)]) -> Result<()> {
        let max = self.payload_max();
        let mut pages = Vec::with_capacity(path.len());
        for (pid, _) in path {
            pages.push(self.pool.write(*pid)?);
        }
        // Freed once the latches are released: a freed page may become a free-list trunk.
        let mut dead = Vec::new();
        let mut level = pages.len() - 1;
        while level > 0 {
            if pages[level].node.payload_len() >= max / 4 {
                break;
            }
            let ci = path[level - 1].1;
            let (nkeys, left_i) = match &pages[level - 1].node {
                Node::Internal { keys, .. } => (
                    keys.len(),
                    if ci < keys.len() {
                        ci
                    } else {
                        ci.saturating_sub(1)
                    },
                ),
                _ => return Err(corrupt_kind(path[level - 1].0, "internal")),
            };
            if nkeys == 0 {
                break;
            }
            // Merge children left_i and left_i + 1 of the parent.
            let (lpid, rpid, sep) = match &pages[level - 1].node {
                Node::Internal { keys, children } => {
                    (children[left_i], children[left_i + 1], keys[left_i].clone())
                }
                _ => return Err(corrupt_kind(path[level - 1].0, "internal")),
            };
            let this = path[level].0;
            let other_pid = if this == lpid { rpid } else { lpid };
            let mut other = self.pool.write(other_pid)?;
            let (left, right): (&mut WritePage<'_>, &mut WritePage<'_>) = if this == lpid {
                (&mut pages[level], &mut other)
            } else {
                (&mut other, &mut pages[level])
            };
            let merged_len = left.node.payload_len()
                + right.node.payload_len()
                + if matches!(left.node, Node::Internal { .. }) {
                    internal_entry_len(&sep)
                } else {
                    0
                };
            if merged_len > max {
                break;
            }
            let rnode = std::mem::replace(&mut right.node, Node::Leaf(Vec::new()));
            // The absorbed sibling is emptied (and freed): like every page this commit
            // changes, it must not be written before the commit's record is logged. Unmarked,
            // a dirty sibling could be written empty under its old LSN; a crash that lost the
            // merge's record would then leave the parent pointing at an empty leaf.
            if !crate::probe::is(
                self.pool.sabotage(),
                crate::probe::Sabotage::MergeUnmarkedSibling,
            ) {
                self.mark(right, false);
            }
            match (&mut left.node, rnode) {
                (Node::Leaf(l), Node::Leaf(r)) => l.extend(r),
                (
                    Node::Internal { keys, children },
                    Node::Internal {
                        keys: rk,
                        children: rc,
                    },
                ) => {
                    keys.push(sep);
                    keys.extend(rk);
                    children.extend(rc);
                }
                _ => return Err(corrupt_kind(rpid, "sibling of the same kind")),
            }
            self.mark(left, true);
            drop(other);
            if crate::probe::is(
                self.pool.sabotage(),
                crate::probe::Sabotage::MergeUnmarkedSibling,
            ) {
                // The sabotage also writes every writable dirty page here, as a checkpoint in
                // another thread (or evictions later in this commit) can: the race, rare with
                // the mark missing alone, then happens whenever the sibling was dirty.
                while self.pool.clean_batch(None)? > 0 {}
            }
            if let Node::Internal { keys, children } = &mut pages[level - 1].node {
                keys.remove(left_i);
                children.remove(left_i + 1);
            }
            self.mark(&mut pages[level - 1], true);
            dead.push(rpid);
            level -= 1;
        }
        // Collapse a root with one child.
        if let Node::Internal { keys, children } = &pages[0].node {
            if keys.is_empty() {
                let child = children[0];
                let node = if pages.len() > 1 && pages[1].id == child {
                    std::mem::replace(&mut pages[1].node, Node::Leaf(Vec::new()))
                } else {
                    let mut c = self.pool.write(child)?;
                    let node = std::mem::replace(&mut c.node, Node::Leaf(Vec::new()));
                    // Emptied (and freed) too: unwritable until the record is logged.
                    self.mark(&mut c, false);
                    node
                };
                pages[0].node = node;
                self.mark(&mut pages[0], true);
                dead.push(child);
            }
        }
        drop(pages);
        for pid in dead {
            self.free(pid)?;
        }
        Ok(())
    }
}

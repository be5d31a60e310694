//! Splitting over-full nodes along a root-to-leaf path (the insert side of [`super::Apply::put`]).

use super::{corrupt_kind, Error, Result};
use crate::format::{internal_entry_len, leaf_entry_len, Key, Node};

/// A separator to insert into an internal node in place: (level, index, key, new child).
pub(super) type SepInPlace = (usize, usize, Key, u64);

/// What [`split_path`] did: the new pages, the highest level changed, a separator for in place.
pub(super) type Split = (Vec<(u64, Node)>, usize, Option<SepInPlace>);

/// Splits the over-full nodes of a root-to-leaf path bottom-up. `nodes` holds copies of the
/// levels changed so far (the leaf at least); `orig` gives the nodes as they are in the pool.
/// A parent that has room for the new separator is not copied: the separator is returned, to
/// be inserted in place. A parent that must split too is copied. `next_id` names each new
/// page. `appended`: the leaf overflowed by a key past all of its own (see [`split_node`]).
/// Returns the new pages, the highest level changed, and that separator, if any.
pub(super) fn split_path<'p>(
    nodes: &mut [Option<Node>],
    orig: &dyn Fn(usize) -> &'p Node,
    path: &[(u64, usize)],
    max: usize,
    mut appended: bool,
    mut next_id: impl FnMut() -> u64,
) -> Result<Split> {
    let mut new = Vec::new();
    let mut level = nodes.len() - 1;
    loop {
        let node = nodes[level].get_or_insert_with(|| orig(level).clone());
        if node.payload_len() <= max {
            break;
        }
        let (sep, right) = split_node(node, appended);
        if level == 0 {
            // Root split: the root keeps its page id, its contents move to two children.
            let left = std::mem::replace(node, Node::Leaf(Vec::new()));
            if left.payload_len() > max || right.payload_len() > max {
                return Err(Error::Internal(format!(
                    "a child of root {} over-full after a root split",
                    path[0].0
                )));
            }
            let (l, r) = (next_id(), next_id());
            *node = Node::Internal {
                keys: vec![sep],
                children: vec![l, r],
            };
            new.push((l, left));
            new.push((r, right));
            break;
        }
        let r = next_id();
        new.push((r, right));
        let ci = path[level - 1].1;
        if nodes[level - 1].is_none() {
            let parent = orig(level - 1);
            if parent.payload_len() + internal_entry_len(&sep) <= max {
                return Ok((new, level - 1, Some((level - 1, ci, sep, r))));
            }
        }
        let parent = nodes[level - 1].get_or_insert_with(|| orig(level - 1).clone());
        let Node::Internal { keys, children } = parent else {
            return Err(corrupt_kind(path[level - 1].0, "internal"));
        };
        appended = appended && ci == keys.len();
        keys.insert(ci, sep);
        children.insert(ci + 1, r);
        level -= 1;
    }
    Ok((new, level, None))
}

/// Splits an over-full node; returns the separator and the right part (the node keeps the
/// left). Halves of about equal size, except when the overflow came from appending past the
/// node's last key (`appended`): then the node keeps all it had and the right part starts
/// with the new entry alone, so keys inserted in order fill their pages instead of leaving
/// each one half empty (InnoDB's split point for sequential inserts).
fn split_node(node: &mut Node, appended: bool) -> (Key, Node) {
    match node {
        Node::Leaf(es) => {
            let sizes: Vec<usize> = es.iter().map(|(k, v)| leaf_entry_len(k, v)).collect();
            let m = if appended && es.len() >= 2 {
                es.len() - 1
            } else {
                best_split(&sizes, 0)
            };
            let right: Vec<_> = es.split_off(m);
            (right[0].0.clone(), Node::Leaf(right))
        }
        Node::Internal { keys, children } => {
            let sizes: Vec<usize> = keys.iter().map(|k| internal_entry_len(k)).collect();
            let m = if appended && keys.len() >= 3 {
                // The right node: the last two children and the key between them.
                keys.len() - 2
            } else {
                best_split(&sizes, 1).min(keys.len() - 1)
            };
            let rkeys = keys.split_off(m + 1);
            let sep = keys.pop().unwrap_or_default();
            let rchildren = children.split_off(m + 1);
            (
                sep,
                Node::Internal {
                    keys: rkeys,
                    children: rchildren,
                },
            )
        }
        _ => (Key::new(), Node::Leaf(Vec::new())),
    }
}

/// Index `m` (1..len) minimising the larger half when items `[..m]` stay left.
fn best_split(sizes: &[usize], min_right: usize) -> usize {
    let total: usize = sizes.iter().sum();
    let mut left = 0;
    let mut best = (usize::MAX, 1);
    for (i, s) in sizes
        .iter()
        .enumerate()
        .take(sizes.len().saturating_sub(min_right))
    {
        left += s;
        let m = i + 1;
        if m >= sizes.len() {
            break;
        }
        let worse = left.max(total - left);
        if worse < best.0 {
            best = (worse, m);
        }
    }
    best.1.max(1)
}

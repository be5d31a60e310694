//! The pages a lookup depends on, for diagnostics: which pages hold a key.

use super::{child_index, corrupt_kind};
use crate::buffer::Pool;
use crate::error::Result;
use crate::format::{Node, Val};

/// The pages a lookup of `key` in the tree at `root` reads: root to leaf, then the overflow
/// pages of its value, if any. Stops at the first page that cannot be read or is not what
/// the path needs (the pages up to it are returned with the error's page last).
pub(crate) fn lookup_pages(pool: &Pool, root: u64, key: &[u8]) -> (Vec<u64>, Result<()>) {
    let mut pages = Vec::new();
    let mut pid = root;
    loop {
        if let Err(e) = super::descend(&mut pages.len(), pid) {
            return (pages, Err(e));
        }
        pages.push(pid);
        let page = match pool.read(pid) {
            Ok(p) => p,
            Err(e) => return (pages, Err(e)),
        };
        let val = match &page.node {
            Node::Internal { keys, children } => {
                pid = children[child_index(keys, key)];
                continue;
            }
            Node::Leaf(es) => es
                .binary_search_by(|(k, _)| super::key_cmp(k, key))
                .ok()
                .map(|i| es[i].1.clone()),
            _ => return (pages, Err(corrupt_kind(pid, "tree"))),
        };
        if let Some(Val::Overflow { first, len }) = val {
            let (mut next, mut pages_left) = (first, len.div_ceil(64).max(1));
            // Bounded by the value's length (a chunk holds at least 64 bytes): a damaged
            // chain that loops cannot make this walk forever.
            while next != 0 && pages_left > 0 {
                pages.push(next);
                pages_left -= 1;
                let p = match pool.read(next) {
                    Ok(p) => p,
                    Err(e) => return (pages, Err(e)),
                };
                match &p.node {
                    Node::Overflow { next: n, .. } => next = *n,
                    _ => return (pages, Err(corrupt_kind(next, "overflow"))),
                }
            }
        }
        return (pages, Ok(()));
    }
}

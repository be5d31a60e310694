#![allow(clippy::unwrap_used)]
//! The allocator against a model: held pages are never handed out nor rewritten (made a
//! trunk) until released, and every page is either in use or on the free list exactly once.

use crate::btree::Apply;
use crate::buffer::Pool;
use crate::format::{LogHeader, Meta, Node, Page, Val};
use crate::wal::Wal;
use crate::TornMode;
use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const META: u64 = 2;
/// The catalog root's place: never free.
const ROOT: u64 = 3;

fn setup() -> Pool {
    let data: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let log: DeviceRef = Arc::new(MemDevice::with_capacity(4 << 20).unwrap());
    let id = LogHeader {
        db_id: 7,
        capacity: 2 << 20,
        epoch: 0,
    };
    // Durable up to 1 MiB: every LSN stamped here passes the WAL rule.
    let wal = Arc::new(Wal::new(log, 2 << 20, id, 0, 1 << 20, 0));
    let pool = Pool::new(data, 4096, 4096, TornMode::Atomic, 40, 8, wal);
    pool.install(Page {
        id: META,
        lsn: 1,
        node: Node::Meta(Meta {
            next_page: ROOT + 1,
            next_table: 1,
            free: Vec::new(),
            free_trunk: 0,
        }),
    })
    .unwrap()
    .modified_at(1);
    pool.install(Page {
        id: ROOT,
        lsn: 1,
        node: Node::Leaf(Vec::new()),
    })
    .unwrap()
    .modified_at(1);
    pool
}

fn commit(pool: &Pool, lsn: u64, f: impl FnOnce(&mut Apply<'_>)) {
    let mut ap = Apply::new(pool, META);
    ap.hold = Some(lsn);
    f(&mut ap);
    let pages: Vec<u64> = ap.touched.iter().chain(&ap.freed).copied().collect();
    pool.stamp(&pages, lsn, &Default::default()).unwrap();
    pool.applied.store(lsn + 1, Ordering::Release);
}

#[derive(Clone, Debug)]
enum Op {
    /// A value of this many overflow pages.
    Write(usize),
    /// Frees the value with this index (modulo the values), held or not.
    Free(usize, bool),
    /// Releases the holds of commits up to this many commits ago.
    Release(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..300).prop_map(Op::Write),
        4 => (0usize..64, proptest::bool::weighted(0.8)).prop_map(|(i, h)| Op::Free(i, h)),
        1 => (0u64..6).prop_map(Op::Release),
    ]
}

/// Every page from `META + 2` up to `next_page` is either in `used` or free, once.
fn audit(pool: &Pool, used: &BTreeSet<u64>) -> BTreeSet<u64> {
    let Node::Meta(m) = pool.read(META).unwrap().node.clone() else {
        panic!("no meta page")
    };
    let mut free = BTreeSet::new();
    let mut claim = |p: u64| assert!(free.insert(p), "page {p} is free twice");
    m.free.iter().for_each(|&p| claim(p));
    let mut t = m.free_trunk;
    while t != 0 {
        claim(t);
        let Node::Trunk { next, free } = pool.read(t).unwrap().node.clone() else {
            panic!("trunk {t} is not a trunk page")
        };
        free.iter().for_each(|&p| claim(p));
        t = next;
    }
    assert!(free.is_disjoint(used), "a page in use is free");
    let all: BTreeSet<u64> = (META + 2..m.next_page).collect();
    let both: BTreeSet<u64> = free.union(used).copied().collect();
    assert_eq!(both, all, "pages leaked or beyond next_page");
    free
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    #[test]
    fn held_pages_are_never_reused_before_release(ops in proptest::collection::vec(op(), 1..50)) {
        let pool = setup();
        let mut values: Vec<(u64, Vec<u64>)> = Vec::new();
        // Held pages -> the commit that freed them.
        let mut held: BTreeMap<u64, u64> = BTreeMap::new();
        let mut lsn = 100;
        for op in ops {
            lsn += 1;
            match op {
                Op::Write(n) => {
                    let live: usize = values.iter().map(|(_, v)| v.len()).sum();
                    if live + held.len() + n > 3000 {
                        continue;
                    }
                    let data = vec![lsn as u8; n * 2000];
                    let mut val = None;
                    commit(&pool, lsn, |ap| val = Some(ap.write_overflow(&data).unwrap()));
                    let Some(Val::Overflow { first, .. }) = val else { panic!("no chain") };
                    let mut pids = Vec::new();
                    let mut p = first;
                    while p != 0 {
                        prop_assert!(!held.contains_key(&p), "held page {} handed out", p);
                        pids.push(p);
                        let Node::Overflow { next, .. } = pool.read(p).unwrap().node.clone() else {
                            panic!("page {p} is not an overflow page")
                        };
                        p = next;
                    }
                    values.push((first, pids));
                }
                Op::Free(i, hold) => {
                    if values.is_empty() {
                        continue;
                    }
                    let (first, pids) = values.remove(i % values.len());
                    commit(&pool, lsn, |ap| {
                        if !hold {
                            ap.hold = None;
                        }
                        ap.free_value(&Val::Overflow { first, len: 0 }).unwrap();
                    });
                    if hold {
                        for p in pids {
                            held.insert(p, lsn);
                        }
                    }
                }
                Op::Release(back) => {
                    let horizon = lsn - back;
                    pool.held().release(horizon);
                    held.retain(|_, &mut c| c > horizon);
                }
            }
            prop_assert_eq!(pool.held().len(), held.len());
            let used: BTreeSet<u64> =
                values.iter().flat_map(|(_, p)| p.iter().copied()).collect();
            let free = audit(&pool, &used);
            for &p in held.keys() {
                prop_assert!(free.contains(&p), "held page {} is not free", p);
                prop_assert!(
                    matches!(pool.read(p).unwrap().node, Node::Overflow { .. }),
                    "held page {} was rewritten", p
                );
            }
        }
    }
}

#![allow(clippy::unwrap_used)]
//! Unit tests of tree changes against the buffer pool and the log.
//!
//! Regression (crash-test defect C, seed 1 cycle 973 with 4 threads: three neighbouring keys of
//! the long-key table lost): a merge empties the right sibling it absorbs. That page must stay
//! unwritable until the merge's record is stamped (and so durable before it is written, by the
//! WAL rule). Before the fix it was emptied without being marked in progress: when it was
//! already dirty, the cleaner (another thread, the checkpoint, or an eviction later in the
//! same commit) could write the empty leaf under its old LSN before the merge was logged; a
//! crash that then lost the merge's record left the parent on disk pointing at an empty leaf,
//! and redo (which sees the leaf's LSN as current) never brought its keys back.

use super::Apply;
use crate::buffer::Pool;
use crate::format::{decode_page, LogHeader, Meta, Node, Page, Val};
use crate::wal::Wal;
use crate::TornMode;
use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::DeviceRef;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const META: u64 = 2;
const ROOT: u64 = 3;

fn key(i: usize) -> Vec<u8> {
    let mut k = format!("K{i:04}-").into_bytes();
    k.resize(900, b'a' + (i % 26) as u8);
    k
}

fn setup(torn: TornMode) -> (Pool, DeviceRef) {
    let data: DeviceRef = Arc::new(
        MemDevice::new(MemConfig {
            capacity_bytes: 16 << 20,
            atomic_write_unit: Some(4096),
            streams: 4,
        })
        .unwrap(),
    );
    let log: DeviceRef = Arc::new(MemDevice::with_capacity(4 << 20).unwrap());
    // The log is durable up to 1 MiB: every LSN the test stamps passes the WAL rule, so only
    // the pool's own rules decide what the cleaner may write.
    let id = LogHeader {
        db_id: 7,
        capacity: 2 << 20,
        epoch: 0,
    };
    let wal = Arc::new(Wal::new(log, 2 << 20, id, 0, 1 << 20, 0));
    let pool = Pool::new(data.clone(), 4096, 64, torn, 40, 8, wal);
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
    (pool, data)
}

/// Applies `f` as the commit with LSN `lsn` and stamps its pages.
fn commit(pool: &Pool, lsn: u64, f: impl FnOnce(&mut Apply<'_>)) {
    let mut ap = Apply::new(pool, META);
    f(&mut ap);
    let pages: Vec<u64> = ap.touched.iter().chain(&ap.freed).copied().collect();
    pool.stamp(&pages, lsn, &Default::default()).unwrap();
    pool.applied.store(lsn + 1, Ordering::Release);
}

fn run(torn: TornMode) {
    let (pool, _data) = setup(torn);
    // 12 long keys: a root over leaves of two to four entries (inserted in descending order:
    // ascending inserts would fill each leaf before starting the next).
    commit(&pool, 100, |ap| {
        for i in (0..12).rev() {
            ap.put(ROOT, &key(i), Val::Inline(vec![1; 10])).unwrap();
        }
    });
    pool.flush_dirty(None, &mut |_, _| {}).unwrap();
    let Node::Internal { children, .. } = pool.read(ROOT).unwrap().node.clone() else {
        panic!("the root did not split");
    };
    // Two neighbouring leaves A and B (B right of A) whose entries fit one page together.
    let entries = |pid: u64| match &pool.read(pid).unwrap().node {
        Node::Leaf(es) => es.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        n => panic!("page {pid} is not a leaf: {n:?}"),
    };
    let (a, b) = children
        .windows(2)
        .map(|w| (w[0], w[1]))
        .find(|&(a, b)| entries(b).len() <= 3 && entries(a).len() >= 2)
        .expect("no pair of leaves that can merge");
    let (a_keys, b_keys) = (entries(a), entries(b));
    // B becomes dirty (and stays so): an update of one of its keys.
    commit(&pool, 200, |ap| {
        ap.put(ROOT, &b_keys[0], Val::Inline(vec![2; 10])).unwrap();
    });
    let b_on_disk = pool.read_raw(b).unwrap();
    // The commit with LSN 300 deletes A's keys but one: A merges with B, which it absorbs and
    // frees. Before the commit is stamped (its record is not yet logged), the cleaner runs.
    let mut ap = Apply::new(&pool, META);
    for k in &a_keys[1..] {
        ap.delete(ROOT, k).unwrap();
    }
    assert!(
        ap.freed.contains(&b),
        "A did not absorb B: the test needs the merge"
    );
    pool.clean_batch(None).unwrap();
    let now = pool.read_raw(b).unwrap();
    let page = decode_page(&now, b).unwrap();
    assert!(
        now == b_on_disk,
        "torn {torn}: the cleaner wrote page {b}, emptied by an unlogged merge, as {:?} under LSN {} \
         (a crash now loses keys {:?})",
        page.node,
        page.lsn,
        b_keys
            .iter()
            .map(|k| String::from_utf8_lossy(&k[..6]).into_owned())
            .collect::<Vec<_>>()
    );
    // Once stamped (and so logged first), the freed page may be written.
    let pages: Vec<u64> = ap.touched.iter().chain(&ap.freed).copied().collect();
    pool.stamp(&pages, 300, &Default::default()).unwrap();
    pool.applied.store(301, Ordering::Release);
    pool.flush_dirty(None, &mut |_, _| {}).unwrap();
    let merged = entries(a);
    for k in a_keys[..1].iter().chain(&b_keys) {
        assert!(merged.contains(k), "key lost by the merge");
    }
}

#[test]
fn merge_keeps_the_absorbed_sibling_unwritable_until_stamped() {
    for torn in TornMode::ALL {
        run(torn);
    }
}

/// A new page of 100 bytes `fill`, committed with LSN 100 and written.
fn written_page(pool: &Pool, fill: u8) -> u64 {
    let mut p = 0;
    commit(pool, 100, |ap| {
        p = ap
            .alloc(Node::Overflow {
                next: 0,
                data: vec![fill; 100],
            })
            .unwrap();
    });
    pool.flush_dirty(None, &mut |_, _| {}).unwrap();
    p
}

/// Writes more new pages than the pool has frames (commits from `first_lsn` on), so that
/// every page resident before is evicted.
fn evict_all(pool: &Pool, first_lsn: u64) {
    for round in 0..8u64 {
        commit(pool, first_lsn + round, |ap| {
            for _ in 0..10 {
                ap.alloc(Node::Overflow {
                    next: 0,
                    data: vec![9; 10],
                })
                .unwrap();
            }
        });
        pool.flush_dirty(None, &mut |_, _| {}).unwrap();
    }
}

/// Regression (found by reading the undo journal): a commit that replaces the node of a page
/// that was not resident (a freed page becoming a free-list trunk, the head trunk allocated)
/// and then fails must leave that page reading as its durable copy. Before the fix the
/// rollback kept the commit's node, marked clean, so a page that was live again after the
/// rollback was served with the wrong contents.
#[test]
fn a_rollback_gives_a_page_that_was_not_resident_its_durable_copy_back() {
    let (pool, _data) = setup(TornMode::Atomic);
    let p = written_page(&pool, 7);
    // More written pages than the pool has frames: `p` is evicted.
    evict_all(&pool, 200);
    assert!(!pool.is_resident(p), "page {p} is still in the pool");
    pool.begin_undo();
    pool.install(Page {
        id: p,
        lsn: 0,
        node: Node::Trunk {
            next: 0,
            free: Vec::new(),
        },
    })
    .unwrap()
    .modified();
    assert_eq!(pool.dirty_frames(), pool.count_dirty_frames());
    pool.rollback_undo().unwrap();
    assert_eq!(pool.dirty_frames(), pool.count_dirty_frames());
    let node = pool.read(p).unwrap().node.clone();
    match node {
        Node::Overflow { data, .. } => assert_eq!(data, vec![7; 100]),
        n => panic!("page {p} reads as {n:?} after the rollback, not its durable copy"),
    }
}

proptest::proptest! {
    /// The word-at-a-time key order is the bytewise order, for keys of any length.
    #[test]
    fn key_cmp_is_the_bytewise_order(
        a in proptest::collection::vec(0u8..4, 0..40),
        b in proptest::collection::vec(0u8..4, 0..40),
    ) {
        proptest::prop_assert_eq!(super::key_cmp(&a, &b), a.cmp(&b));
        proptest::prop_assert_eq!(super::key_cmp(&a, &a), std::cmp::Ordering::Equal);
    }
}

/// A hit through this thread's hint must find the page's current copy: after the page was
/// evicted, its old frame reused for other pages and the page changed in a new frame, the hint
/// (the old frame) is refused and the page table answers.
#[test]
fn a_stale_hint_is_refused() {
    let (pool, _data) = setup(TornMode::Atomic);
    let p = written_page(&pool, 1);
    drop(pool.read(p).unwrap()); // remembers the frame
    drop(pool.read(p).unwrap()); // a hit through the hint
    evict_all(&pool, 200);
    assert!(!pool.is_resident(p));
    commit(&pool, 300, |ap| {
        let mut w = ap.pool.write(p).unwrap();
        w.node = Node::Overflow {
            next: 0,
            data: vec![2; 100],
        };
        ap.mark(&mut w, true);
    });
    pool.flush_dirty(None, &mut |_, _| {}).unwrap();
    evict_all(&pool, 400);
    for _ in 0..2 {
        let node = pool.read(p).unwrap().node.clone();
        assert_eq!(
            node,
            Node::Overflow {
                next: 0,
                data: vec![2; 100],
            }
        );
    }
}

/// Leaf fill after 40 inserts of 900-byte values (four fit a 4 KiB page), in the given order.
fn leaf_sizes(order: impl Iterator<Item = usize>) -> Vec<usize> {
    let (pool, _data) = setup(TornMode::Atomic);
    commit(&pool, 100, |ap| {
        for i in order {
            let k = format!("K{i:04}").into_bytes();
            ap.put(ROOT, &k, Val::Inline(vec![1; 900])).unwrap();
        }
    });
    let dirty = pool.dirty_frames();
    assert!(dirty > 10);
    assert_eq!(dirty, pool.count_dirty_frames());
    let Node::Internal { children, .. } = pool.read(ROOT).unwrap().node.clone() else {
        panic!("the root did not split");
    };
    let sizes = children
        .iter()
        .map(|&c| match &pool.read(c).unwrap().node {
            Node::Leaf(es) => es.len(),
            n => panic!("page {c} is not a leaf: {n:?}"),
        })
        .collect();
    pool.flush_dirty(None, &mut |_, _| {}).unwrap();
    assert_eq!((pool.dirty_frames(), pool.count_dirty_frames()), (0, 0));
    sizes
}

/// Keys inserted in ascending order fill each leaf before the next one starts (the split
/// point is the new key); other orders split leaves in halves.
#[test]
fn ascending_inserts_fill_their_leaves() {
    let up = leaf_sizes(0..40);
    assert_eq!(up.iter().sum::<usize>(), 40);
    let (last, full) = up.split_last().unwrap();
    assert!(full.iter().all(|&n| n == 4), "ascending: {up:?}");
    assert!(*last >= 1);
    let down = leaf_sizes((0..40).rev());
    assert_eq!(down.iter().sum::<usize>(), 40);
    assert!(
        down.len() > up.len() + 2,
        "descending inserts should leave half-full leaves: {down:?} vs {up:?}"
    );
}

proptest::proptest! {
    /// The prefetching search finds the child the plain one does, for any separators and key
    /// (short and long keys, duplicates in the probe, the key before, between and after all).
    #[test]
    fn child_index_counts_the_separators_at_or_below_the_key(
        mut seps in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..30), 0..300),
        key in proptest::collection::vec(0u8..4, 0..30),
    ) {
        seps.sort();
        seps.dedup();
        let keys: Vec<crate::format::Key> = seps.iter().map(|s| s.as_slice().into()).collect();
        let want = seps.partition_point(|s| s.as_slice() <= key.as_slice());
        proptest::prop_assert_eq!(super::child_index(&keys, &key), want);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

    /// A commit drops the logical operation of a key whose leaf it images, judging by the leaf
    /// the operation found ([`Apply::last_leaf`]) rather than by descending again at the end:
    /// the two must agree whatever splits and merges came after (a found leaf that a merge
    /// freed counts as imaged: its keys went to the imaged sibling).
    #[test]
    fn the_leaf_an_operation_found_is_imaged_iff_the_keys_last_leaf_is(
        preload in proptest::collection::btree_map(0u16..400, 20usize..700, 0..60),
        ops in proptest::collection::vec((0u16..400, proptest::option::of(20usize..1500)), 1..60),
    ) {
        let (pool, _) = setup(TornMode::Doublewrite);
        let k = |i: u16| format!("k{i:05}").into_bytes();
        commit(&pool, 2, |ap| {
            for (&i, &len) in &preload {
                ap.put(ROOT, &k(i), Val::Inline(vec![1; len])).unwrap();
            }
        });
        let mut ap = Apply::new(&pool, META);
        let mut found = Vec::new();
        for &(i, len) in &ops {
            match len {
                Some(len) => drop(ap.put(ROOT, &k(i), Val::Inline(vec![2; len])).unwrap()),
                None => drop(ap.delete(ROOT, &k(i)).unwrap()),
            }
            found.push((i, ap.last_leaf));
        }
        for (i, leaf) in found {
            let path = ap.leaf_path(ROOT, &k(i)).unwrap();
            let last = path[path.len() - 1].0;
            proptest::prop_assert_eq!(
                ap.imaged.contains(&leaf) || ap.freed.contains(&leaf),
                ap.imaged.contains(&last),
                "key {} found leaf {} and ends in leaf {}", i, leaf, last
            );
        }
    }
}

/// A tree whose pages point back up (a stale internal page left by a lost write can close such
/// a cycle) is reported as corruption by every descent, not followed forever: the long crash
/// run's lost-write cycles hung a reader in `get` (seed 1, atomic, lazy, one thread).
#[test]
fn a_cycle_in_the_tree_is_corruption_not_a_hang() {
    let (pool, _) = setup(TornMode::Atomic);
    let child = ROOT + 1;
    for (id, to) in [(ROOT, child), (child, ROOT)] {
        pool.install(Page {
            id,
            lsn: 1,
            node: Node::Internal {
                keys: vec![b"m".as_slice().into()],
                children: vec![to, to],
            },
        })
        .unwrap()
        .modified_at(1);
    }
    let cyclic = |e: crate::Error| e.is_corruption() && e.to_string().contains("point back up");
    assert!(cyclic(super::get(&pool, ROOT, b"k").unwrap_err()));
    assert!(cyclic(super::depth(&pool, ROOT).unwrap_err()));
    let from = std::ops::Bound::Unbounded;
    assert!(cyclic(super::batch(&pool, ROOT, &from, false).unwrap_err()));
    let (pages, r) = super::path::lookup_pages(&pool, ROOT, b"k");
    assert!(cyclic(r.unwrap_err()) && pages.len() == 64, "{pages:?}");
}

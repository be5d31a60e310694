//! Crash recovery: double-write repair, page verification, and redo from the checkpoint.

use super::catalog::{decode_table, CATALOG};
use super::{forget_flash_cache, open_flash, RecoveryStats};
use crate::btree::{self, Apply};
use crate::buffer::Pool;
use crate::error::{Error, Result};
use crate::format::{
    check_page, decode_log_header, encode_log_header, is_zero, CommitRecord, LogHeader, Node, Page,
    RedoOp, Superblock, SECTOR,
};
use crate::options::{DbOptions, TornMode};
use crate::probe::{self, Event, RecoveryStep};
use crate::stream::Stream;
use crate::wal::{self, ready_from_allocated, Wal};
use pagoda_device::DeviceRef;
use pagoda_device::WriteHints;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What recovery hands to the database it opens.
pub(super) struct Recovered {
    pub(super) wal: Arc<Wal>,
    pub(super) pool: Pool,
    /// The superblock, after a flash cache it no longer names was forgotten.
    pub(super) sb: Superblock,
    pub(super) stats: RecoveryStats,
    /// Pages found torn or damaged and left so (`DbOptions::allow_corrupt`).
    pub(super) corrupt: BTreeSet<u64>,
}

/// Recovery at open, from the durable superblock `sb`: checks the log belongs to this
/// database, scans it from the checkpoint, starts a new log epoch, builds the pool (with the
/// flash cache, when configured), repairs torn pages from the double-write area, verifies
/// pages when asked, and redoes the log's records.
pub(super) fn recover(
    opts: &DbOptions,
    data: &DeviceRef,
    log: &DeviceRef,
    sb: Superblock,
    log_allocated: Option<u64>,
) -> Result<Recovered> {
    let lcaps = log.caps();
    let lhdr = log_header(log, &sb)?;
    let obs = opts.observer.clone();
    probe::emit(&obs, Event::Recovery(RecoveryStep::ScanLog));
    let scan = wal::scan_log(
        log,
        sb.log_capacity,
        sb.db_id,
        sb.checkpoint_lsn,
        opts.sabotage,
    )?;
    // A crash between a checkpoint's two superblock writes leaves the other copy naming the
    // previous redo start: were `sb` lost, recovery would start there, so the log keeps that
    // range until the open's checkpoint has written both copies (`Db::checkpoint_held`).
    let other = super::bootstrap::other_copy(data, &sb)?;
    let reclaim = other
        .checkpoint_lsn
        .map_or(sb.checkpoint_lsn, |c| c.min(sb.checkpoint_lsn));
    probe::emit(&obs, Event::Recovery(RecoveryStep::NewEpoch));
    let id = new_epoch(log, lhdr)?;
    let wal = Arc::new(
        Wal::new(
            log.clone(),
            sb.log_capacity,
            id,
            Stream::Log.on(&lcaps),
            scan.end,
            reclaim,
        )
        .sabotaged(opts.sabotage)
        .gathering(opts.commit_gather)
        .prepared(log_ready(opts, log_allocated, sb.log_capacity, scan.end)),
    );
    let sb = forget_flash_cache(opts, data, sb)?;
    let pool = open_pool(opts, data, log, &sb, &wal)?;
    pool.applied.store(scan.end, Ordering::Release);
    let mut rec = RecoveryStats {
        checkpoint_lsn: sb.checkpoint_lsn,
        log_groups: scan.groups,
        torn_log_tail: scan.torn_tail,
        superblock_fallback: other.newer,
        superblock_damage: other.damage,
        ..RecoveryStats::default()
    };
    if opts.torn.uses_doublewrite_area() {
        probe::emit(&obs, Event::Recovery(RecoveryStep::RepairDoublewrite));
        rec.torn_pages_repaired += pool.repair_from_doublewrite(sb.meta_page, sb.checkpoint_lsn)?;
    }
    let imaged: BTreeSet<u64> = scan
        .records
        .iter()
        .flat_map(|(_, r)| r.images.iter().map(|(p, _)| *p))
        .collect();
    if opts.verify_on_open {
        let bad = verify_pages(&pool, data, &sb, &imaged)?;
        if let Some(&first) = bad.first() {
            return Err(Error::Corruption {
                page_id: first,
                all_pages: bad,
                detail: "checksum verification at open failed".into(),
            });
        }
    }
    let mut corrupt = BTreeSet::new();
    probe::emit(&obs, Event::Recovery(RecoveryStep::Redo));
    let last_cts = redo(
        &pool,
        opts,
        sb.meta_page,
        &scan.records,
        &mut corrupt,
        &mut rec,
    )?;
    rec.records_replayed = scan.records.len() as u64;
    rec.last_cts = last_cts.max(sb.checkpoint_cts);
    if !corrupt.is_empty() && !opts.allow_corrupt {
        return Err(unrepaired(&pool, &corrupt));
    }
    rec.corrupt_pages = corrupt.iter().copied().collect();
    Ok(Recovered {
        wal,
        pool,
        sb,
        stats: rec,
        corrupt,
    })
}

/// The buffer pool over `data`, with the flash cache when the options name one (its
/// directory rebuilt from the cache device).
fn open_pool(
    opts: &DbOptions,
    data: &DeviceRef,
    log: &DeviceRef,
    sb: &Superblock,
    wal: &Arc<Wal>,
) -> Result<Pool> {
    let page_size = sb.page_size as usize;
    let flash = open_flash(opts, data, log, sb)?;
    Ok(Pool::new(
        data.clone(),
        page_size,
        opts.buffer_bytes / page_size,
        opts.torn,
        sb.dw_start,
        sb.dw_pages as usize,
        wal.clone(),
    )
    .with_spill(opts.spill_bytes() / page_size)
    .with_flash(flash)
    .sabotaged(opts.sabotage))
}

/// The log device's header, which must name this database.
fn log_header(log: &DeviceRef, sb: &Superblock) -> Result<LogHeader> {
    let mut lh = vec![0u8; SECTOR];
    log.read(0, &mut lh)?;
    let lhdr = decode_log_header(&lh).map_err(|e| Error::LogCorruption {
        lsn: 0,
        offset: 0,
        detail: format!("log header: {e}"),
    })?;
    if lhdr.db_id != sb.db_id {
        return Err(Error::config(
            "the log device belongs to another database (ids differ); give the matching log",
        ));
    }
    Ok(lhdr)
}

/// Writes the log header of this open's epoch, durable before any group of it: groups that
/// were in flight at a crash may sit after the end, and this open's groups carry a newer
/// epoch, so the scan never takes one of those for their continuation (one sector written,
/// instead of erasing the ring).
fn new_epoch(log: &DeviceRef, lhdr: LogHeader) -> Result<LogHeader> {
    let id = LogHeader {
        epoch: lhdr.epoch.wrapping_add(1),
        ..lhdr
    };
    log.write(
        0,
        &encode_log_header(&id),
        WriteHints::stream(Stream::Log.on(&log.caps())),
    )?;
    log.flush()?;
    Ok(id)
}

/// The error for pages recovery found torn or damaged and could not repair (torn mode
/// none), saying why the first failed (checksum, identity) as a read of it would.
fn unrepaired(pool: &Pool, corrupt: &BTreeSet<u64>) -> Error {
    let all: Vec<u64> = corrupt.iter().copied().collect();
    let why = pool
        .read_page(all[0])
        .ok()
        .and_then(|b| crate::format::decode_page(&b, all[0]).err())
        .map_or(String::new(), |e| match e {
            Error::Corruption { detail, .. } => format!("; page {}: {detail}", all[0]),
            _ => String::new(),
        });
    Error::Corruption {
        page_id: all[0],
        all_pages: all,
        detail: format!(
            "torn or damaged page(s) found during recovery (torn mode none cannot repair \
             them){why}"
        ),
    }
}

/// Checks the checksum of every allocated page (except those recovery will overwrite).
fn verify_pages(
    pool: &Pool,
    data: &DeviceRef,
    sb: &Superblock,
    skip: &BTreeSet<u64>,
) -> Result<Vec<u64>> {
    let ps = pool.page_size();
    let per_page = (ps / SECTOR) as u64;
    // Through the flash cache: a page's newest durable copy may be there.
    let read = |pid: u64| -> Result<Vec<u8>> {
        if pid < pool.capacity_pages() {
            return pool.read_page(pid);
        }
        let mut b = vec![0u8; ps];
        data.read(pid * per_page, &mut b)?;
        Ok(b)
    };
    let mut bad = Vec::new();
    let mut limit = sb.meta_page + 2;
    let mbuf = read(sb.meta_page)?;
    match crate::format::decode_page(&mbuf, sb.meta_page) {
        Ok(Page {
            node: Node::Meta(m),
            ..
        }) => limit = limit.max(m.next_page),
        _ if skip.contains(&sb.meta_page) => {}
        _ => bad.push(sb.meta_page),
    }
    if let Some(&m) = skip.iter().next_back() {
        limit = limit.max(m + 1);
    }
    for pid in sb.meta_page + 1..limit.min(pool.capacity_pages()) {
        if skip.contains(&pid) {
            continue;
        }
        let buf = read(pid)?;
        if !is_zero(&buf) && crate::format::decode_page(&buf, pid).is_err() {
            bad.push(pid);
        }
    }
    Ok(bad)
}

/// Redo from the checkpoint: pass 1 restores the newest logged image of every page whose
/// on-disk LSN is older; pass 2 replays the logical operations of every commit record on
/// leaves whose LSN is older than the record. Returns the highest commit timestamp seen.
fn redo(
    pool: &Pool,
    opts: &DbOptions,
    meta: u64,
    records: &[(u64, CommitRecord)],
    corrupt: &mut BTreeSet<u64>,
    rec: &mut RecoveryStats,
) -> Result<u64> {
    let none = opts.torn == TornMode::None;
    let last_cts = records.iter().map(|(_, r)| r.cts).max().unwrap_or(0);
    let dropped: BTreeSet<_> = records
        .iter()
        .flat_map(|(_, r)| &r.ops)
        .filter_map(|op| match op {
            RedoOp::DropTable { table } => Some(*table),
            _ => None,
        })
        .collect();
    install_images(pool, records, none, corrupt, rec)?;
    let catalog_root = meta + 1;
    let replay = Replay {
        pool,
        meta,
        records,
        none,
    };
    replay.run(&|t| (t == CATALOG).then_some(catalog_root), corrupt)?;
    let roots = table_roots(pool, catalog_root)?;
    replay.run(
        &|t| {
            if t == CATALOG || dropped.contains(&t) {
                None
            } else {
                roots.get(&t).copied()
            }
        },
        corrupt,
    )?;
    Ok(last_cts)
}

/// Installs the newest image the log holds of each page, where the page on the device is
/// older (or torn: repaired; torn mode none cannot repair it, the page is noted corrupt).
fn install_images(
    pool: &Pool,
    records: &[(u64, CommitRecord)],
    none: bool,
    corrupt: &mut BTreeSet<u64>,
    rec: &mut RecoveryStats,
) -> Result<()> {
    let mut latest: BTreeMap<u64, (u64, &Node)> = BTreeMap::new();
    for (lsn, r) in records {
        for (pid, node) in &r.images {
            latest.insert(*pid, (*lsn, node));
        }
    }
    for (pid, (lsn, node)) in latest {
        let buf = pool.read_page(pid)?;
        if !is_zero(&buf) {
            match check_page(&buf, pid) {
                Ok(l) if l >= lsn => continue,
                Ok(_) => {}
                Err(_) if none => {
                    corrupt.insert(pid);
                    continue;
                }
                Err(_) => rec.torn_pages_repaired += 1,
            }
        }
        let mut w = pool.install(Page {
            id: pid,
            lsn,
            node: node.clone(),
        })?;
        w.modified_at(lsn);
    }
    Ok(())
}

/// Every table's root, from the catalog.
fn table_roots(pool: &Pool, catalog_root: u64) -> Result<HashMap<u32, u64>> {
    let mut roots = HashMap::new();
    let mut cursor = Bound::Unbounded;
    loop {
        let b = btree::batch(pool, catalog_root, &cursor, false)?;
        for (_, v) in &b.entries {
            if let Some(t) = decode_table(&btree::load_value(pool, v)?) {
                roots.insert(t.id, t.root);
            }
        }
        match b.fence {
            Some(f) => cursor = Bound::Included(f),
            None => break,
        }
    }
    Ok(roots)
}

/// The logical redo of the log's records over the trees.
struct Replay<'a> {
    pool: &'a Pool,
    meta: u64,
    records: &'a [(u64, CommitRecord)],
    /// Torn mode none: a damaged leaf is noted corrupt, not an error.
    none: bool,
}

impl Replay<'_> {
    /// Replays the operations on the tables `table_filter` gives a root for. Each record is
    /// decided per operation before it changes any leaf: a leaf whose LSN is at least the
    /// record's already holds all of the record's effects.
    fn run(
        &self,
        table_filter: &dyn Fn(u32) -> Option<u64>,
        corrupt: &mut BTreeSet<u64>,
    ) -> Result<()> {
        let (pool, meta, none) = (self.pool, self.meta, self.none);
        for (lsn, r) in self.records {
            let mut todo = Vec::with_capacity(r.ops.len());
            for op in &r.ops {
                let (table, key, val) = match op {
                    RedoOp::Put { table, key, val } => (*table, key, Some(val.clone())),
                    RedoOp::Delete { table, key } => (*table, key, None),
                    RedoOp::DropTable { .. } => continue,
                };
                let Some(root) = table_filter(table) else {
                    continue;
                };
                let ap = Apply::new(pool, meta);
                match ap.leaf_lsn(root, key) {
                    Ok(l) if l >= *lsn => {}
                    Ok(_) => todo.push((root, key, val)),
                    Err(Error::Corruption { all_pages, .. }) if none => corrupt.extend(all_pages),
                    Err(e) => return Err(e),
                }
            }
            let mut ap = Apply::new(pool, meta);
            ap.recovery_lsn = Some(*lsn);
            for (root, key, val) in todo {
                match ap.redo_apply(root, key, val) {
                    Ok(()) => {}
                    Err(Error::Corruption { all_pages, .. }) if none => corrupt.extend(all_pages),
                    Err(e) => return Err(e),
                }
            }
            // The record's pages become writable together, with its LSN.
            let touched: Vec<u64> = ap.touched.iter().copied().collect();
            // No page counts as imaged here: the double-write copy guards recovery's writes.
            pool.stamp(&touched, *lsn, &BTreeSet::new())?;
        }
        Ok(())
    }
}

/// Ring bytes of the log known written (`None`: all of them): what the caller says, or what
/// the log file holds on disk, and at least the log recovery found (zeros must never go
/// below its end; beyond it lie only a torn tail and groups of earlier opens).
fn log_ready(opts: &DbOptions, allocated: Option<u64>, capacity: u64, end: u64) -> Option<u64> {
    let said = opts
        .log_ready_bytes
        .or_else(|| allocated.map(|a| ready_from_allocated(a, capacity)))?;
    Some(said.max(end.min(capacity)))
}

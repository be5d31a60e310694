//! The offline inspector (`pagoda inspect PATH`): verification of a database's superblocks,
//! pages and log without opening it.
//!
//! A tool over the engine, not part of its core: it shares only the on-disk [`crate::format`]
//! decoders, the log's read-only scan ([`read_ring`] and the recovery scan) and the code that
//! opens a directory's devices read-only; it never builds a buffer pool or a [`crate::Db`].
//!
//! Reads only. Every allocated page's checksum, identity and payload are checked; the log is
//! scanned from the checkpoint. A torn page of a database that crashed and was not reopened
//! yet is reported too, with a note when the double-write area holds an intact copy or the log
//! an image of it (recovery would repair it).

use crate::db::devices;
use crate::error::{Error, Result};
use crate::format::{
    check_page, check_version, decode_log_header, decode_page, is_zero, Node, Superblock, SECTOR,
};
use crate::wal;
use crate::DbOptions;
use pagoda_device::DeviceRef;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Reads `len` bytes (rounded up to whole sectors) of the log ring starting at `lsn`, wrapping
/// at the ring's end; for tools that walk the log group by group (layout: `docs/format.md`).
pub use crate::wal::read_ring;

/// One intact group of the log.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LogGroup {
    /// Its LSN.
    pub lsn: u64,
    /// Its byte offset on the log device (it may wrap to the ring's start).
    pub offset: u64,
    /// Its length in bytes, header included.
    pub len: u64,
    /// Whether a later group records that the log was synced past it: damage to it is then
    /// reported as log corruption, while damage to a group no later one vouches for looks like
    /// the torn tail of a crash.
    pub vouched: bool,
}

/// What inspection found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct InspectReport {
    /// Page size.
    pub page_size: usize,
    /// Superblock generation in use.
    pub generation: u64,
    /// Redo start.
    pub checkpoint_lsn: u64,
    /// Pages checked.
    pub pages_checked: u64,
    /// Pages never written (zeros).
    pub pages_unwritten: u64,
    /// Corrupt pages: `(page id, what is wrong)`.
    pub corrupt_pages: Vec<(u64, String)>,
    /// Problems of the superblocks (one bad copy is survivable).
    pub superblock_problems: Vec<String>,
    /// Log problems (damage before the end of the log).
    pub log_problems: Vec<String>,
    /// Log groups after the checkpoint.
    pub log_groups: u64,
    /// Commit records after the checkpoint.
    pub log_records: u64,
    /// Whether the log ends in a torn (never acknowledged) group.
    pub torn_log_tail: bool,
    /// The damaged log group, `(LSN, byte offset on the log device)`, when the log is damaged
    /// before its end.
    pub log_damage: Option<(u64, u64)>,
    /// The intact log groups after the checkpoint, in LSN order.
    pub log_group_list: Vec<LogGroup>,
    /// Bytes of the log's ring (after its header sector).
    pub log_capacity: u64,
    /// Whether the database's newest pages sit in its flash cache, which this offline check
    /// does not read (data-device pages may then be older or, with torn mode `none`, torn).
    pub flash_dependent: bool,
}

impl InspectReport {
    /// Whether nothing is damaged.
    pub fn is_ok(&self) -> bool {
        self.corrupt_pages.is_empty() && self.log_problems.is_empty()
    }

    /// Ids of the corrupt pages.
    pub fn corrupt_page_ids(&self) -> Vec<u64> {
        self.corrupt_pages.iter().map(|(p, _)| *p).collect()
    }

    /// `Ok(self)` when clean, otherwise an error naming the damaged pages or log position.
    pub fn into_result(self) -> Result<Self> {
        if let Some((first, detail)) = self.corrupt_pages.first() {
            return Err(Error::Corruption {
                page_id: *first,
                all_pages: self.corrupt_page_ids(),
                detail: detail.clone(),
            });
        }
        if let Some(p) = self.log_problems.first() {
            let (lsn, offset) = self.log_damage.unwrap_or((self.checkpoint_lsn, 0));
            return Err(Error::LogCorruption {
                lsn,
                offset,
                detail: p.clone(),
            });
        }
        Ok(self)
    }
}

impl fmt::Display for InspectReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "page size {} B, superblock generation {}, checkpoint LSN {}",
            self.page_size, self.generation, self.checkpoint_lsn
        )?;
        writeln!(
            f,
            "pages: {} checked, {} never written, {} corrupt",
            self.pages_checked,
            self.pages_unwritten,
            self.corrupt_pages.len()
        )?;
        for (p, d) in &self.corrupt_pages {
            writeln!(f, "  corrupt page {p}: {d}")?;
        }
        for s in &self.superblock_problems {
            writeln!(f, "  superblock: {s}")?;
        }
        if self.flash_dependent {
            writeln!(
                f,
                "  the newest pages are in the database's flash cache (not read here)"
            )?;
        }
        writeln!(
            f,
            "log: {} groups, {} commit records after the checkpoint{}",
            self.log_groups,
            self.log_records,
            if self.torn_log_tail {
                ", torn tail (unacknowledged, ignored)"
            } else {
                ""
            }
        )?;
        for p in &self.log_problems {
            writeln!(f, "  log: {p}")?;
        }
        write!(f, "{}", if self.is_ok() { "ok" } else { "CORRUPT" })
    }
}

/// Inspects the database in directory `path` (`data.pagoda`, `log.pagoda`).
pub fn inspect_dir(path: &Path) -> Result<InspectReport> {
    let d = devices(&DbOptions::in_dir(path), true)?;
    inspect_devices(&d.data, &d.log)
}

/// Inspects a database on the given devices.
pub fn inspect_devices(data: &DeviceRef, log: &DeviceRef) -> Result<InspectReport> {
    let mut r = InspectReport::default();
    let sb = newest_superblock(data, &mut r)?;
    r.page_size = sb.page_size as usize;
    r.generation = sb.generation;
    r.checkpoint_lsn = sb.checkpoint_lsn;
    r.flash_dependent = sb.flash_dependent;
    r.log_capacity = sb.log_capacity;
    let ps = r.page_size;
    if !ps.is_power_of_two() || !(4096..=65536).contains(&ps) {
        return Err(Error::corrupt(
            0,
            format!("superblock names page size {ps}"),
        ));
    }
    let pages = Pages {
        data,
        ps,
        cap: data.caps().capacity_bytes() / ps as u64,
    };
    let dw = pages.doublewrite_copies(&sb)?;
    pages.check(&sb, &dw, &mut r)?;
    inspect_log(log, &sb, &dw, &mut r)?;
    Ok(r)
}

/// The newest valid superblock copy; a damaged copy is a problem of the report.
fn newest_superblock(data: &DeviceRef, r: &mut InspectReport) -> Result<Superblock> {
    let mut sbuf = vec![0u8; 2 * SECTOR];
    data.read(0, &mut sbuf)?;
    check_version(&sbuf)?;
    let mut best: Option<Superblock> = None;
    for (i, c) in sbuf.chunks(SECTOR).enumerate() {
        if is_zero(c) {
            continue;
        }
        match Superblock::decode(c) {
            Ok(sb) => {
                if best.as_ref().is_none_or(|b| sb.generation > b.generation) {
                    best = Some(sb);
                }
            }
            Err(e) => r.superblock_problems.push(format!("copy {i}: {e}")),
        }
    }
    best.ok_or_else(|| {
        Error::corrupt(
            0,
            "no valid superblock: not a pagoda database or both copies damaged",
        )
    })
}

/// The data device's pages, `ps` bytes each, `cap` of them.
struct Pages<'a> {
    data: &'a DeviceRef,
    ps: usize,
    cap: u64,
}

impl Pages<'_> {
    fn read(&self, pid: u64) -> Result<Vec<u8>> {
        let mut b = vec![0u8; self.ps];
        self.data.read(pid * (self.ps / SECTOR) as u64, &mut b)?;
        Ok(b)
    }

    /// The intact copies in the double-write area: page id to LSN.
    fn doublewrite_copies(&self, sb: &Superblock) -> Result<BTreeMap<u64, u64>> {
        let mut dw = BTreeMap::new();
        for i in 0..u64::from(sb.dw_pages) {
            let pid = sb.dw_start + i;
            if pid >= self.cap {
                break;
            }
            let b = self.read(pid)?;
            if is_zero(&b) {
                continue;
            }
            let id = u64::from_le_bytes(b[8..16].try_into().unwrap_or([0xff; 8]));
            if let Ok(lsn) = check_page(&b, id) {
                dw.insert(id, lsn);
            }
        }
        Ok(dw)
    }

    /// Checks the meta page and every allocated page after it, noting for each corrupt one
    /// whether opening the database repairs it.
    fn check(&self, sb: &Superblock, dw: &BTreeMap<u64, u64>, r: &mut InspectReport) -> Result<()> {
        let mut limit = sb.meta_page + 2;
        if sb.meta_page >= self.cap {
            return Err(Error::corrupt(
                0,
                "superblock names a meta page beyond the device",
            ));
        }
        match decode_page(&self.read(sb.meta_page)?, sb.meta_page) {
            Ok(p) => match p.node {
                Node::Meta(m) => limit = limit.max(m.next_page),
                _ => r
                    .corrupt_pages
                    .push((sb.meta_page, "meta page has the wrong kind".into())),
            },
            Err(e) => r.corrupt_pages.push((sb.meta_page, e.to_string())),
        }
        r.pages_checked += 1;
        for pid in sb.meta_page + 1..limit.min(self.cap) {
            let b = self.read(pid)?;
            r.pages_checked += 1;
            if is_zero(&b) {
                r.pages_unwritten += 1;
                continue;
            }
            if let Err(e) = decode_page(&b, pid) {
                let mut d = match e {
                    Error::Corruption { detail, .. } => detail,
                    other => other.to_string(),
                };
                if dw.contains_key(&pid) {
                    d.push_str(" (the double-write area holds an intact copy: opening the database repairs it)");
                }
                if sb.flash_dependent {
                    d.push_str(" (the newest copy may be in the flash cache, which inspect does not read: open the database with its flash cache)");
                }
                r.corrupt_pages.push((pid, d));
            }
        }
        Ok(())
    }
}

/// The log: its header, its groups from the checkpoint on, and which corrupt pages it holds
/// an image of (opening the database repairs those).
fn inspect_log(
    log: &DeviceRef,
    sb: &Superblock,
    dw: &BTreeMap<u64, u64>,
    r: &mut InspectReport,
) -> Result<()> {
    let mut lh = vec![0u8; SECTOR];
    log.read(0, &mut lh)?;
    match decode_log_header(&lh) {
        Err(e) => r.log_problems.push(format!("log header: {e}")),
        Ok(h) if h.db_id != sb.db_id => r
            .log_problems
            .push("log header belongs to another database".into()),
        Ok(_) => match wal::scan(log, sb.log_capacity, sb.db_id, sb.checkpoint_lsn) {
            Ok(s) => {
                r.log_groups = s.groups;
                r.log_records = s.records.len() as u64;
                r.torn_log_tail = s.torn_tail;
                r.log_group_list = log_groups(&s.headers, sb.log_capacity);
                // Pages written without a double-write copy are those the log imaged.
                let imaged: std::collections::BTreeSet<u64> = s
                    .records
                    .iter()
                    .flat_map(|(_, rec)| rec.images.iter().map(|(pid, _)| *pid))
                    .collect();
                for (pid, d) in &mut r.corrupt_pages {
                    if imaged.contains(pid) && !dw.contains_key(pid) {
                        d.push_str(
                            " (the log holds an image of it: opening the database repairs it)",
                        );
                    }
                }
            }
            Err(e) => {
                if let Error::LogCorruption { lsn, offset, .. } = &e {
                    r.log_damage = Some((*lsn, *offset));
                }
                r.log_problems.push(e.to_string());
            }
        },
    }
    Ok(())
}

/// The groups `headers` describe, each vouched for when a later one was written after the log
/// was synced past it.
fn log_groups(headers: &[crate::format::GroupHeader], capacity: u64) -> Vec<LogGroup> {
    let mut synced_past = 0;
    let mut out: Vec<LogGroup> = headers
        .iter()
        .rev()
        .map(|h| {
            let g = LogGroup {
                lsn: h.lsn,
                offset: wal::device_offset(capacity, h.lsn),
                len: u64::from(h.len),
                vouched: synced_past > h.lsn,
            };
            synced_past = synced_past.max(h.durable);
            g
        })
        .collect();
    out.reverse();
    out
}

//! A fresh database's layout, and reading the superblock.

use crate::error::{Error, Result};
use crate::format::{
    check_version, encode_log_header, encode_page, is_zero, LogHeader, Meta, Node, Page,
    Superblock, HEADER_BYTES, SECTOR,
};
use crate::options::DbOptions;
use crate::settings;
use crate::stream::Stream;
use pagoda_device::{DeviceRef, WriteHints};

pub(super) fn read_sb(dev: &DeviceRef) -> Result<Option<Superblock>> {
    let buf = read_area(dev)?;
    check_version(&buf)?;
    let a = Superblock::decode(&buf[..SECTOR]);
    let b = Superblock::decode(&buf[SECTOR..]);
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(Some(if a.generation >= b.generation { a } else { b })),
        (Ok(a), Err(_)) => Ok(Some(a)),
        (Err(_), Ok(b)) => Ok(Some(b)),
        (Err(ea), Err(eb)) => {
            if is_zero(&buf) {
                Ok(None)
            } else {
                // Never a fresh database over it: the pages and the log are still there.
                Err(Error::corrupt(
                    0,
                    format!(
                        "both superblock copies (data device sectors 0 and 1) are damaged \
                         (copy 0: {ea}; copy 1: {eb}), so no checkpoint can be trusted"
                    ),
                ))
            }
        }
    }
}

fn read_area(dev: &DeviceRef) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; 2 * SECTOR];
    dev.read(0, &mut buf)?;
    Ok(buf)
}

/// What the superblock copy other than `sb` (the one recovery starts from) says.
#[derive(Debug, Default)]
pub(super) struct OtherCopy {
    /// Its redo start, when it is intact and older: the log from there on is kept.
    pub(super) checkpoint_lsn: Option<u64>,
    /// Why it is not usable, when it was written and is now damaged (or torn).
    pub(super) damage: Option<String>,
    /// Whether the damaged copy was the newer one (its generation field reads higher).
    pub(super) newer: bool,
}

/// Reads the copy in the other slot than `sb`'s.
pub(super) fn other_copy(dev: &DeviceRef, sb: &Superblock) -> Result<OtherCopy> {
    let buf = read_area(dev)?;
    let slot = (1 - sb.generation % 2) as usize;
    let raw = &buf[slot * SECTOR..(slot + 1) * SECTOR];
    Ok(match Superblock::decode(raw) {
        Ok(o) if o.db_id == sb.db_id && o.generation < sb.generation => OtherCopy {
            checkpoint_lsn: Some(o.checkpoint_lsn),
            ..OtherCopy::default()
        },
        // A new database's second slot was never written.
        Err(_) if is_zero(raw) => OtherCopy::default(),
        Err(why) => {
            // The damage may be anywhere, the generation field too: it only says which copy
            // the report calls the newer one.
            let generation = u64::from_le_bytes(raw[16..24].try_into().unwrap_or_default());
            let newer = generation > sb.generation;
            OtherCopy {
                checkpoint_lsn: None,
                damage: Some(format!(
                    "superblock copy {slot} (data device sector {slot}) is damaged ({why}; its \
                     generation field reads {generation}): recovery started from copy {}, \
                     generation {}, {}",
                    1 - slot,
                    sb.generation,
                    if newer {
                        "the older copy"
                    } else {
                        "the newest copy"
                    }
                )),
                newer,
            }
        }
        Ok(_) => OtherCopy::default(),
    })
}

/// Writes a fresh database's log header, meta page, catalog root and first superblock.
pub(super) fn create(opts: &DbOptions, data: &DeviceRef, log: &DeviceRef) -> Result<Superblock> {
    let ps = opts.page_size as u64;
    let dw_start = HEADER_BYTES / ps;
    let meta = dw_start + u64::from(opts.dw_pages);
    let catalog = meta + 1;
    if (catalog + 1) * ps > data.caps().capacity_bytes() {
        return Err(Error::config(format!(
            "data device of {} bytes is too small for a database with {} byte pages",
            data.caps().capacity_bytes(),
            ps
        )));
    }
    let dev_log = log.caps().capacity_bytes().saturating_sub(SECTOR as u64);
    let log_capacity =
        opts.log_capacity.map_or(dev_log, |c| c.min(dev_log)) / SECTOR as u64 * SECTOR as u64;
    if log_capacity < 256 * 1024 {
        return Err(Error::config(format!(
            "log of {log_capacity} bytes is too small: give at least 256 KiB"
        )));
    }
    let db_id: u64 = rand::random();
    let lstream = WriteHints::stream(Stream::Log.on(&log.caps()));
    let dstream = WriteHints::stream(Stream::Data.on(&data.caps()));
    let header = LogHeader {
        db_id,
        capacity: log_capacity,
        epoch: 0,
    };
    log.write(0, &encode_log_header(&header), lstream)?;
    // No clearing of the ring: group headers carry the database id, so no group an earlier
    // database left on the device is read as this one's (whatever its size or position).
    log.flush()?;
    let mut buf = Vec::new();
    let pages = [
        Page {
            id: meta,
            lsn: 0,
            node: Node::Meta(Meta {
                next_page: catalog + 1,
                next_table: 1,
                free: Vec::new(),
                free_trunk: 0,
            }),
        },
        Page {
            id: catalog,
            lsn: 0,
            node: Node::Leaf(Vec::new()),
        },
    ];
    for p in &pages {
        encode_page(p, opts.page_size, &mut buf);
        data.write(p.id * ps / SECTOR as u64, &buf, dstream)?;
    }
    settings::write(data, opts.torn, dstream.stream)?;
    data.flush()?;
    let sb = Superblock {
        generation: 1,
        page_size: opts.page_size as u32,
        checkpoint_lsn: 0,
        checkpoint_cts: 0,
        log_capacity,
        dw_start,
        dw_pages: opts.dw_pages,
        meta_page: meta,
        db_id,
        flash_cache_id: 0,
        flash_seq: 0,
        flash_dependent: false,
    };
    data.write(1, &sb.encode(), dstream)?;
    data.flush()?;
    Ok(sb)
}

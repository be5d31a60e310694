//! The on-disk format (see `docs/format.md`): superblocks, page header and node payloads, log
//! groups and records. Everything is little-endian; every structure carries a CRC32C.
//!
//! **Not a stable API.** These items change whenever the format does, with no deprecation;
//! an embedder needs none of them (they are for `pagoda inspect` and for tests that plant
//! damage).
//!
//! This module is public on purpose, unlike the engine's other internals: the on-disk format
//! is a documented interface of its own (`docs/format.md`), and tools outside the engine
//! ([`crate::inspect`], the tests that plant corruption in pages, superblocks and log groups)
//! decode and encode it with these same functions rather than with a second copy that could
//! drift. It holds plain encoders and decoders only; nothing here touches a device or a
//! running database.

use crate::error::{Error, Result};

mod flash;
mod leaf_bytes;
mod log;
pub use crate::stream::Stream;
pub use flash::*;
pub(crate) use leaf_bytes::LeafBytes;
pub use log::*;
#[cfg(test)]
mod tests;

/// Bytes of the page header.
pub const PAGE_HEADER: usize = 32;
/// Magic at byte 4 of every page.
pub const PAGE_MAGIC: [u8; 4] = *b"PGDP";
/// Magic of the superblock.
pub const SB_MAGIC: [u8; 8] = *b"PAGODASB";
/// Magic of a log group header.
pub const GROUP_MAGIC: [u8; 4] = *b"PGLG";
/// Magic of the log device header.
pub const LOG_MAGIC: [u8; 8] = *b"PAGODALG";
/// Bytes of a log group header.
pub const GROUP_HEADER: usize = 48;
/// Bytes of a log record header.
pub const RECORD_HEADER: usize = 17;
/// Format version. 2: group headers record the durable LSN and the database id (version 1
/// logs cannot tell damage to acknowledged groups from a torn tail). 3: the superblock binds
/// the database to its flash cache.
pub const FORMAT_VERSION: u32 = 3;
/// Bytes reserved at the start of the data device for the two superblocks (sectors 0 and 1)
/// and future use; page ids below `HEADER_BYTES / page_size` are never allocated.
pub const HEADER_BYTES: u64 = 64 * 1024;
/// Sector size.
pub const SECTOR: usize = pagoda_device::SECTOR_SIZE;

/// Page kinds (byte 24 of the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Allocation state: next page id, next table id, free list.
    Meta = 1,
    /// B+tree leaf.
    Leaf = 2,
    /// B+tree internal node.
    Internal = 3,
    /// A piece of a large value.
    Overflow = 4,
    /// A page of the free list beyond what the meta page holds.
    Trunk = 5,
}

/// A leaf value: inline bytes or a chain of overflow pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// Stored in the leaf.
    Inline(Vec<u8>),
    /// Stored in overflow pages starting at `first`; `len` bytes in all.
    Overflow {
        /// First overflow page.
        first: u64,
        /// Total value length.
        len: u64,
    },
}

impl Val {
    /// Encoded size in a leaf entry (tag + body).
    pub fn encoded_len(&self) -> usize {
        match self {
            Val::Inline(v) => 1 + 4 + v.len(),
            Val::Overflow { .. } => 1 + 16,
        }
    }
}

/// Allocation state, in the meta page.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The next never-used page id.
    pub next_page: u64,
    /// The next table id.
    pub next_table: u32,
    /// Freed pages available for reuse.
    pub free: Vec<u64>,
    /// First free-list trunk page (0 = none): more free pages, once `free` is full.
    pub free_trunk: u64,
}

/// A key in a decoded node: up to 24 bytes inline, so that a binary search over a node's
/// entries reads their keys where the entries are instead of following a pointer per key.
pub type Key = smallvec::SmallVec<[u8; 24]>;

/// A decoded node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// Allocation state.
    Meta(Meta),
    /// Sorted `(key, value)` entries.
    Leaf(Vec<(Key, Val)>),
    /// `keys.len() + 1` children; a key `k` goes to child `#{keys <= k}`.
    Internal {
        /// Separators.
        keys: Vec<Key>,
        /// Child page ids.
        children: Vec<u64>,
    },
    /// A piece of a large value and the next page (0 = last).
    Overflow {
        /// Next page of the chain, 0 at the end.
        next: u64,
        /// Bytes of this piece.
        data: Vec<u8>,
    },
    /// A free page holding free-list entries moved out of the full meta page; it is itself
    /// free, and is reused when the meta page takes its entries back.
    Trunk {
        /// Next trunk page, 0 at the end.
        next: u64,
        /// Free page ids.
        free: Vec<u64>,
    },
}

impl Node {
    /// The kind byte.
    pub fn kind(&self) -> Kind {
        match self {
            Node::Meta(_) => Kind::Meta,
            Node::Leaf(_) => Kind::Leaf,
            Node::Internal { .. } => Kind::Internal,
            Node::Overflow { .. } => Kind::Overflow,
            Node::Trunk { .. } => Kind::Trunk,
        }
    }

    /// Payload bytes when encoded.
    pub fn payload_len(&self) -> usize {
        match self {
            Node::Meta(m) => 8 + 4 + 4 + 8 * m.free.len() + if m.free_trunk != 0 { 8 } else { 0 },
            Node::Leaf(es) => 4 + es.iter().map(|(k, v)| leaf_entry_len(k, v)).sum::<usize>(),
            Node::Internal { keys, .. } => {
                4 + 8 + keys.iter().map(|k| internal_entry_len(k)).sum::<usize>()
            }
            Node::Overflow { data, .. } => 8 + 4 + data.len(),
            Node::Trunk { free, .. } => 8 + 4 + 8 * free.len(),
        }
    }
}

/// Bytes a leaf entry takes.
pub fn leaf_entry_len(key: &[u8], v: &Val) -> usize {
    2 + key.len() + v.encoded_len()
}

/// Bytes an internal entry (separator + right child) takes.
pub fn internal_entry_len(key: &[u8]) -> usize {
    2 + key.len() + 8
}

/// A page in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// Page id (= byte offset / page size on the data device).
    pub id: u64,
    /// LSN of the last commit record whose effects the page holds.
    pub lsn: u64,
    /// Contents.
    pub node: Node,
}

fn put_u16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// Encodes a value the same way in leaf pages and redo records (docs/format.md): tag 0, u32
/// length, bytes; or tag 1, first overflow page, total length.
fn put_val(out: &mut Vec<u8>, v: &Val) {
    match v {
        Val::Inline(b) => {
            out.push(0);
            put_u32(out, b.len() as u32);
            out.extend_from_slice(b);
        }
        Val::Overflow { first, len } => {
            out.push(1);
            put_u64(out, *first);
            put_u64(out, *len);
        }
    }
}

/// Decodes what [`put_val`] wrote; `None` on a bad tag or short input.
fn read_val(r: &mut Reader<'_>) -> Option<Val> {
    Some(match r.u8()? {
        0 => {
            let len = r.u32()? as usize;
            Val::Inline(r.bytes(len)?.to_vec())
        }
        1 => Val::Overflow {
            first: r.u64()?,
            len: r.u64()?,
        },
        _ => return None,
    })
}

/// A bounds-checked little-endian reader; every read failure is a typed `what` error.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads from `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    /// u8.
    pub fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }
    /// u16.
    pub fn u16(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    /// u32.
    pub fn u32(&mut self) -> Option<u32> {
        self.bytes(4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    }
    /// u64.
    pub fn u64(&mut self) -> Option<u64> {
        self.bytes(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    }
}

/// Encodes a page into `out` (exactly `page_size` bytes), computing the CRC.
pub fn encode_page(page: &Page, page_size: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&PAGE_MAGIC);
    put_u64(out, page.id);
    put_u64(out, page.lsn);
    out.push(page.node.kind() as u8);
    out.extend_from_slice(&[0; 3]);
    put_u32(out, page.node.payload_len() as u32);
    debug_assert_eq!(out.len(), PAGE_HEADER);
    encode_node(&page.node, out);
    debug_assert!(
        out.len() <= page_size,
        "page {} overfull: {} bytes",
        page.id,
        out.len()
    );
    out.resize(page_size, 0);
    let crc = crc32c::crc32c(&out[4..]);
    out[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes a node payload.
pub fn encode_node(node: &Node, out: &mut Vec<u8>) {
    match node {
        Node::Meta(m) => {
            put_u64(out, m.next_page);
            put_u32(out, m.next_table);
            put_u32(out, m.free.len() as u32);
            for f in &m.free {
                put_u64(out, *f);
            }
            // Written only when set, so that databases without trunks keep the old layout.
            if m.free_trunk != 0 {
                put_u64(out, m.free_trunk);
            }
        }
        Node::Leaf(es) => {
            put_u32(out, es.len() as u32);
            for (k, v) in es {
                put_u16(out, k.len() as u16);
                out.extend_from_slice(k);
                put_val(out, v);
            }
        }
        Node::Internal { keys, children } => {
            put_u32(out, keys.len() as u32);
            put_u64(out, children[0]);
            for (k, c) in keys.iter().zip(&children[1..]) {
                put_u16(out, k.len() as u16);
                out.extend_from_slice(k);
                put_u64(out, *c);
            }
        }
        Node::Overflow { next, data } => {
            put_u64(out, *next);
            put_u32(out, data.len() as u32);
            out.extend_from_slice(data);
        }
        Node::Trunk { next, free } => {
            put_u64(out, *next);
            put_u32(out, free.len() as u32);
            for f in free {
                put_u64(out, *f);
            }
        }
    }
}

/// Whether a page image is all zeros (never written).
pub fn is_zero(buf: &[u8]) -> bool {
    buf.iter().all(|&b| b == 0)
}

/// Checks the CRC and identity of a page image without decoding the payload. Returns the LSN.
pub fn check_page(buf: &[u8], expect_id: u64) -> std::result::Result<u64, String> {
    if buf.len() < PAGE_HEADER {
        return Err("short page".into());
    }
    let stored = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let crc = crc32c::crc32c(&buf[4..]);
    if stored != crc {
        return Err(format!(
            "checksum mismatch (stored {stored:#010x}, computed {crc:#010x}): torn write or bit flip"
        ));
    }
    if buf[4..8] != PAGE_MAGIC {
        return Err("bad page magic".into());
    }
    let mut r = Reader::new(&buf[8..]);
    let id = r.u64().unwrap_or(u64::MAX);
    if id != expect_id {
        return Err(format!("page header names page {id}: misdirected write"));
    }
    Ok(r.u64().unwrap_or(0))
}

/// Whether `buf` is an intact image of a page other than `pid`: a misdirected write, which a
/// torn write of `pid` (a mix of its own versions) can never look like.
pub fn names_other_page(buf: &[u8], pid: u64) -> bool {
    let id = buf
        .get(8..16)
        .and_then(|b| b.try_into().ok())
        .map_or(pid, u64::from_le_bytes);
    id != pid && check_page(buf, id).is_ok()
}

/// Decodes a full page image read from `expect_id`.
pub fn decode_page(buf: &[u8], expect_id: u64) -> Result<Page> {
    // The page's place on the data device, so an operator can look at the bytes.
    let at = |d: String| {
        let byte = expect_id.saturating_mul(buf.len() as u64);
        Error::corrupt(
            expect_id,
            format!("{d} (page home: data device byte {byte})"),
        )
    };
    let lsn = check_page(buf, expect_id).map_err(at)?;
    let bad = |what: &str| Error::corrupt(expect_id, format!("undecodable payload: {what}"));
    let kind = buf[24];
    let len = u32::from_le_bytes([buf[28], buf[29], buf[30], buf[31]]) as usize;
    let payload = buf
        .get(PAGE_HEADER..PAGE_HEADER + len)
        .ok_or_else(|| bad("payload length beyond page"))?;
    let node = decode_node(kind, payload).ok_or_else(|| bad("truncated"))?;
    Ok(Page {
        id: expect_id,
        lsn,
        node,
    })
}

/// Decodes a node payload of kind `kind`.
pub fn decode_node(kind: u8, payload: &[u8]) -> Option<Node> {
    let mut r = Reader::new(payload);
    let node = match kind {
        1 => {
            let next_page = r.u64()?;
            let next_table = r.u32()?;
            let n = r.u32()? as usize;
            let mut free = Vec::with_capacity(n.min(r.remaining() / 8));
            for _ in 0..n {
                free.push(r.u64()?);
            }
            // Absent when there is no trunk.
            let free_trunk = if r.remaining() == 0 { 0 } else { r.u64()? };
            Node::Meta(Meta {
                next_page,
                next_table,
                free,
                free_trunk,
            })
        }
        2 => {
            let n = r.u32()? as usize;
            let mut es = Vec::with_capacity(n.min(r.remaining() / 7));
            for _ in 0..n {
                let kl = r.u16()? as usize;
                let k = Key::from_slice(r.bytes(kl)?);
                let v = read_val(&mut r)?;
                es.push((k, v));
            }
            Node::Leaf(es)
        }
        3 => {
            let n = r.u32()? as usize;
            let mut keys = Vec::with_capacity(n.min(r.remaining() / 10));
            let mut children = vec![r.u64()?];
            for _ in 0..n {
                let kl = r.u16()? as usize;
                keys.push(Key::from_slice(r.bytes(kl)?));
                children.push(r.u64()?);
            }
            Node::Internal { keys, children }
        }
        4 => {
            let next = r.u64()?;
            let n = r.u32()? as usize;
            Node::Overflow {
                next,
                data: r.bytes(n)?.to_vec(),
            }
        }
        5 => {
            let next = r.u64()?;
            let n = r.u32()? as usize;
            let mut free = Vec::with_capacity(n.min(r.remaining() / 8));
            for _ in 0..n {
                free.push(r.u64()?);
            }
            Node::Trunk { next, free }
        }
        _ => return None,
    };
    if r.remaining() != 0 {
        return None;
    }
    Some(node)
}

/// The superblock (two copies, sectors 0 and 1 of the data device; the valid copy with the
/// higher generation wins).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Bumped on every write.
    pub generation: u64,
    /// Page size in bytes.
    pub page_size: u32,
    /// Redo starts here (a log group boundary); everything before is in the data pages.
    pub checkpoint_lsn: u64,
    /// Highest commit timestamp at the checkpoint.
    pub checkpoint_cts: u64,
    /// Log capacity in bytes (ring size).
    pub log_capacity: u64,
    /// First page of the double-write area.
    pub dw_start: u64,
    /// Pages in the double-write area.
    pub dw_pages: u32,
    /// The meta page (the catalog root follows it).
    pub meta_page: u64,
    /// Random id tying the log to the data device.
    pub db_id: u64,
    /// Id of the flash cache this state was written with (0: none).
    pub flash_cache_id: u64,
    /// The flash cache's next ring sequence number at this superblock: a cache that has not
    /// reached it is older than the database.
    pub flash_seq: u64,
    /// Whether pages newer than the data device's copies sit in the flash cache (the database
    /// cannot open without it).
    pub flash_dependent: bool,
}

/// Bytes of a version 1–2 superblock before its CRC.
const SB_BODY_V2: usize = 8 + 4 + 4 + 8 * 5 + 4 + 8 + 8;
/// Bytes of a superblock copy its checksum covers (the 4-byte checksum follows): damage past
/// them is harmless.
pub const SB_BODY: usize = SB_BODY_V2 + 8 + 8 + 4;

impl Superblock {
    /// Encodes into one 4 KiB sector.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(SECTOR);
        b.extend_from_slice(&SB_MAGIC);
        put_u32(&mut b, FORMAT_VERSION);
        put_u32(&mut b, self.page_size);
        put_u64(&mut b, self.generation);
        put_u64(&mut b, self.checkpoint_lsn);
        put_u64(&mut b, self.checkpoint_cts);
        put_u64(&mut b, self.log_capacity);
        put_u64(&mut b, self.dw_start);
        put_u32(&mut b, self.dw_pages);
        put_u64(&mut b, self.meta_page);
        put_u64(&mut b, self.db_id);
        put_u64(&mut b, self.flash_cache_id);
        put_u64(&mut b, self.flash_seq);
        put_u32(&mut b, u32::from(self.flash_dependent));
        let crc = crc32c::crc32c(&b);
        put_u32(&mut b, crc);
        b.resize(SECTOR, 0);
        b
    }

    /// The format version of a sector holding an intact superblock of any version.
    pub fn version(buf: &[u8]) -> Option<u32> {
        // Versions 1 and 2 ended after the database id; version 3 adds the flash binding.
        [SB_BODY_V2, SB_BODY].into_iter().find_map(|body| {
            let stored = u32::from_le_bytes(buf.get(body..body + 4)?.try_into().ok()?);
            (buf[..8] == SB_MAGIC && crc32c::crc32c(&buf[..body]) == stored)
                .then(|| u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]))
        })
    }

    /// Decodes a sector; `Err` says why it is not a valid superblock.
    pub fn decode(buf: &[u8]) -> std::result::Result<Self, String> {
        let body = SB_BODY;
        if buf.len() < body + 4 {
            return Err(format!(
                "superblock of {} bytes, needs {}",
                buf.len(),
                body + 4
            ));
        }
        if buf[..8] != SB_MAGIC {
            return Err("no superblock magic".into());
        }
        let stored = u32::from_le_bytes([buf[body], buf[body + 1], buf[body + 2], buf[body + 3]]);
        if crc32c::crc32c(&buf[..body]) != stored {
            return Err("superblock checksum mismatch".into());
        }
        let mut r = Reader::new(&buf[8..body]);
        let version = r.u32().unwrap_or(0);
        if version != FORMAT_VERSION {
            return Err(format!(
                "format version {version}, this build reads {FORMAT_VERSION}"
            ));
        }
        let page_size = r.u32().unwrap_or(0);
        // Every size the engine derives divides by it: an intact superblock naming another
        // page size than the engine can make was written by something else.
        if !page_size.is_power_of_two() || !(4096..=65536).contains(&page_size) {
            return Err(format!("superblock names page size {page_size}"));
        }
        let sb = Superblock {
            page_size,
            generation: r.u64().unwrap_or(0),
            checkpoint_lsn: r.u64().unwrap_or(0),
            checkpoint_cts: r.u64().unwrap_or(0),
            log_capacity: r.u64().unwrap_or(0),
            dw_start: r.u64().unwrap_or(0),
            dw_pages: r.u32().unwrap_or(0),
            meta_page: r.u64().unwrap_or(0),
            db_id: r.u64().unwrap_or(0),
            flash_cache_id: r.u64().unwrap_or(0),
            flash_seq: r.u64().unwrap_or(0),
            flash_dependent: r.u32().unwrap_or(0) != 0,
        };
        Ok(sb)
    }
}

/// Refuses a database whose intact superblock has another format version (rather than
/// calling it damaged).
pub fn check_version(superblocks: &[u8]) -> Result<()> {
    for c in superblocks.chunks(SECTOR) {
        match Superblock::version(c) {
            Some(v) if v != FORMAT_VERSION => {
                return Err(Error::UnsupportedFormat {
                    found: v,
                    supported: FORMAT_VERSION,
                })
            }
            _ => {}
        }
    }
    Ok(())
}

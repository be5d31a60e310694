//! The flash cache side of the format (FaCE): the cache header, ring segment headers and
//! the directory checkpoint. Layout of the cache device, in 4 KiB sectors:
//!
//! ```text
//! 0, 1        cache header, two slots (generation % 2), each naming its directory area
//! 2 ..        directory areas A and B (`dir_sectors` each)
//! ring        `segments` segments: one header sector + `per_segment` page slots
//! ```

use super::*;

/// Magic of the flash cache header.
pub const FC_MAGIC: [u8; 8] = *b"PGDAFCH1";
/// Magic of a ring segment header.
pub const SEG_MAGIC: [u8; 8] = *b"PGDAFSG1";
/// Magic of a directory checkpoint.
pub const DIR_MAGIC: [u8; 8] = *b"PGDAFDR1";
/// Bytes of a segment header's fixed part.
const SEG_FIXED: usize = 8 + 8 + 8 + 2;
/// Bytes of one slot entry (segment header and directory checkpoint).
const ENTRY: usize = 8 + 8 + 8 + 4 + 1;
/// Most slots a segment can have (its header is one sector).
pub const MAX_PER_SEGMENT: usize = (SECTOR - SEG_FIXED - 4) / ENTRY;

/// The flash cache header: geometry, the database it belongs to, and its newest directory
/// checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheHeader {
    /// Bumped on every write; slot `generation % 2`, directory area `generation % 2`.
    pub generation: u64,
    /// The database this cache belongs to.
    pub db_id: u64,
    /// Random id of this formatting of the cache (segments carry it too).
    pub cache_id: u64,
    /// Page size in bytes.
    pub page_size: u32,
    /// Ring segments.
    pub segments: u32,
    /// Page slots per segment.
    pub per_segment: u32,
    /// Sectors of each directory area.
    pub dir_sectors: u32,
    /// Bytes of the directory checkpoint in area `generation % 2`.
    pub dir_bytes: u32,
    /// CRC32C of those bytes.
    pub dir_crc: u32,
    /// How the ring is written: 0 = FIFO (`face`, `face-gsc`), 1 = in place (`lru`); the
    /// rebuild differs.
    pub layout: u32,
}

impl CacheHeader {
    /// Encodes into one sector.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(SECTOR);
        b.extend_from_slice(&FC_MAGIC);
        put_u32(&mut b, FORMAT_VERSION);
        put_u64(&mut b, self.generation);
        put_u64(&mut b, self.db_id);
        put_u64(&mut b, self.cache_id);
        put_u32(&mut b, self.page_size);
        put_u32(&mut b, self.segments);
        put_u32(&mut b, self.per_segment);
        put_u32(&mut b, self.dir_sectors);
        put_u32(&mut b, self.dir_bytes);
        put_u32(&mut b, self.dir_crc);
        put_u32(&mut b, self.layout);
        let crc = crc32c::crc32c(&b);
        put_u32(&mut b, crc);
        b.resize(SECTOR, 0);
        b
    }

    /// Decodes a sector; `Err` says why it is not a valid header.
    pub fn decode(buf: &[u8]) -> std::result::Result<Self, String> {
        let body = 8 + 4 + 8 * 3 + 4 * 7;
        if buf.len() < body + 4 || buf[..8] != FC_MAGIC {
            return Err("no flash cache header magic".into());
        }
        let stored = u32::from_le_bytes([buf[body], buf[body + 1], buf[body + 2], buf[body + 3]]);
        if crc32c::crc32c(&buf[..body]) != stored {
            return Err("flash cache header checksum mismatch".into());
        }
        let mut r = Reader::new(&buf[8..body]);
        let version = r.u32().unwrap_or(0);
        if version != FORMAT_VERSION {
            return Err(format!(
                "flash cache format version {version} (this build reads {FORMAT_VERSION})"
            ));
        }
        Ok(Self {
            generation: r.u64().unwrap_or(0),
            db_id: r.u64().unwrap_or(0),
            cache_id: r.u64().unwrap_or(0),
            page_size: r.u32().unwrap_or(0),
            segments: r.u32().unwrap_or(0),
            per_segment: r.u32().unwrap_or(0),
            dir_sectors: r.u32().unwrap_or(0),
            dir_bytes: r.u32().unwrap_or(0),
            dir_crc: r.u32().unwrap_or(0),
            layout: r.u32().unwrap_or(0),
        })
    }
}

/// One page slot as a segment header or a directory checkpoint records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotEntry {
    /// Page id.
    pub pid: u64,
    /// The page's LSN.
    pub lsn: u64,
    /// Ring sequence number of the write that put the page there.
    pub seq: u64,
    /// The page image's stored CRC32C (its first four bytes).
    pub crc: u32,
    /// Whether the copy was newer than the data device's when written (or at the directory
    /// checkpoint).
    pub dirty: bool,
}

fn put_entry(b: &mut Vec<u8>, e: &SlotEntry) {
    put_u64(b, e.pid);
    put_u64(b, e.lsn);
    put_u64(b, e.seq);
    put_u32(b, e.crc);
    b.push(u8::from(e.dirty));
}

/// `None` when short, or when the dirty byte is neither 0 nor 1 (only those are written, so
/// another value is damage, not "dirty").
fn read_entry(r: &mut Reader<'_>) -> Option<SlotEntry> {
    Some(SlotEntry {
        pid: r.u64()?,
        lsn: r.u64()?,
        seq: r.u64()?,
        crc: r.u32()?,
        dirty: match r.u8()? {
            0 => false,
            1 => true,
            _ => return None,
        },
    })
}

/// A ring segment's header: which page each slot holds (`None`: unused slot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The cache formatting it belongs to.
    pub cache_id: u64,
    /// Sequence number of the segment write (policy `face`); the highest slot sequence
    /// (policy `lru`, whose slots are written one by one).
    pub seq: u64,
    /// One per slot.
    pub slots: Vec<Option<SlotEntry>>,
}

impl SegmentHeader {
    /// Encodes into one sector (`slots.len() <= MAX_PER_SEGMENT`).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(SECTOR);
        b.extend_from_slice(&SEG_MAGIC);
        put_u64(&mut b, self.cache_id);
        put_u64(&mut b, self.seq);
        put_u16(&mut b, self.slots.len() as u16);
        for s in &self.slots {
            match s {
                Some(e) => put_entry(&mut b, e),
                None => b.extend_from_slice(&[0xff; ENTRY]),
            }
        }
        let crc = crc32c::crc32c(&b);
        put_u32(&mut b, crc);
        b.resize(SECTOR, 0);
        b
    }

    /// Decodes a sector; `None` when it is not an intact segment header.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        if buf.len() < SECTOR || buf[..8] != SEG_MAGIC {
            return None;
        }
        let n = u16::from_le_bytes([buf[24], buf[25]]) as usize;
        if n > MAX_PER_SEGMENT {
            return None;
        }
        let body = SEG_FIXED + n * ENTRY;
        let stored = u32::from_le_bytes(buf[body..body + 4].try_into().ok()?);
        if crc32c::crc32c(&buf[..body]) != stored {
            return None;
        }
        let mut r = Reader::new(&buf[8..body]);
        let cache_id = r.u64()?;
        let seq = r.u64()?;
        r.u16()?;
        let mut slots = Vec::with_capacity(n);
        for _ in 0..n {
            let raw = r.bytes(ENTRY)?;
            if raw.iter().all(|&b| b == 0xff) {
                slots.push(None);
            } else {
                // An entry that does not decode refuses the header rather than reading as
                // an unused slot.
                slots.push(Some(read_entry(&mut Reader::new(raw))?));
            }
        }
        Some(Self {
            cache_id,
            seq,
            slots,
        })
    }
}

/// The directory checkpoint: every valid slot at one moment, and where the ring continues.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirCheckpoint {
    /// Sequence number the next ring write takes.
    pub next_seq: u64,
    /// Segment the next write goes to (policy `face`).
    pub head: u32,
    /// `(slot, entry)` of every valid slot.
    pub entries: Vec<(u32, SlotEntry)>,
}

impl DirCheckpoint {
    /// Bytes an encoding of `slots` entries takes.
    pub fn bytes_for(slots: usize) -> usize {
        8 + 8 + 4 + 4 + slots * (4 + ENTRY)
    }

    /// Encodes (not padded).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(Self::bytes_for(self.entries.len()));
        b.extend_from_slice(&DIR_MAGIC);
        put_u64(&mut b, self.next_seq);
        put_u32(&mut b, self.head);
        put_u32(&mut b, self.entries.len() as u32);
        for (slot, e) in &self.entries {
            put_u32(&mut b, *slot);
            put_entry(&mut b, e);
        }
        b
    }

    /// Decodes; `None` when malformed.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        if buf.len() < 24 || buf[..8] != DIR_MAGIC {
            return None;
        }
        let mut r = Reader::new(&buf[8..]);
        let next_seq = r.u64()?;
        let head = r.u32()?;
        let n = r.u32()? as usize;
        if n > r.remaining() / (4 + ENTRY) {
            return None;
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let slot = r.u32()?;
            entries.push((slot, read_entry(&mut r)?));
        }
        // The caller passes exactly the length the cache header names: bytes past the last
        // entry mean the count or the length is wrong.
        if r.remaining() != 0 {
            return None;
        }
        Some(Self {
            next_seq,
            head,
            entries,
        })
    }
}

//! The log side of the format: the log device header, group headers and commit records.

use super::*;

/// The log device header (sector 0 of the log device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    /// The database's id.
    pub db_id: u64,
    /// Bytes of the ring.
    pub capacity: u64,
    /// Opens so far: each open writes the next epoch here and in every group it writes, so a
    /// group from an earlier open can never continue a later open's log (no need to erase the
    /// ring at open).
    pub epoch: u32,
}

/// Encodes the log device header.
pub fn encode_log_header(h: &LogHeader) -> Vec<u8> {
    let mut b = Vec::with_capacity(SECTOR);
    b.extend_from_slice(&LOG_MAGIC);
    put_u32(&mut b, FORMAT_VERSION);
    put_u64(&mut b, h.db_id);
    put_u64(&mut b, h.capacity);
    put_u32(&mut b, h.epoch);
    let crc = crc32c::crc32c(&b);
    put_u32(&mut b, crc);
    b.resize(SECTOR, 0);
    b
}

/// Decodes the log device header.
pub fn decode_log_header(buf: &[u8]) -> std::result::Result<LogHeader, String> {
    let body = 8 + 4 + 16 + 4;
    // A short buffer is no header (not a panic): callers read a whole sector, tools may not.
    if buf.len() < body + 4 {
        return Err(format!(
            "log header of {} bytes, needs {}",
            buf.len(),
            body + 4
        ));
    }
    if buf[..8] != LOG_MAGIC {
        return Err("no log header magic".into());
    }
    let version = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
    if version != FORMAT_VERSION {
        return Err(format!(
            "log format version {version}, this build reads {FORMAT_VERSION}"
        ));
    }
    let stored = u32::from_le_bytes([buf[body], buf[body + 1], buf[body + 2], buf[body + 3]]);
    if crc32c::crc32c(&buf[..body]) != stored {
        return Err("log header checksum mismatch".into());
    }
    let mut r = Reader::new(&buf[12..body]);
    Ok(LogHeader {
        db_id: r.u64().unwrap_or(0),
        capacity: r.u64().unwrap_or(0),
        epoch: r.u32().unwrap_or(0),
    })
}

/// A group header: written at a sector boundary, followed by the group's records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupHeader {
    /// LSN of the group (its own position).
    pub lsn: u64,
    /// Bytes of the group including this header (unpadded).
    pub len: u32,
    /// Records in the group.
    pub records: u32,
    /// CRC32C of the bytes after the header.
    pub body_crc: u32,
    /// The log was durable up to here when the group was written (at most `lsn`). Syncs
    /// overlap, so a crash may keep this group and lose earlier ones; but a damaged earlier
    /// group below this LSN was synced (its commits may be acknowledged): corruption.
    pub durable: u64,
    /// The database's id: groups left on the device by another database never match.
    pub db_id: u64,
    /// The epoch (open) of the log header when the group was written; along the log epochs
    /// never decrease, so a group left from before a crash cannot continue a later open's log.
    pub epoch: u32,
}

impl GroupHeader {
    /// Encodes into `GROUP_HEADER` bytes.
    pub fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&GROUP_MAGIC);
        out[4..12].copy_from_slice(&self.lsn.to_le_bytes());
        out[12..16].copy_from_slice(&self.len.to_le_bytes());
        out[16..20].copy_from_slice(&self.records.to_le_bytes());
        out[20..24].copy_from_slice(&self.body_crc.to_le_bytes());
        out[24..32].copy_from_slice(&self.durable.to_le_bytes());
        out[32..40].copy_from_slice(&self.db_id.to_le_bytes());
        out[40..44].copy_from_slice(&self.epoch.to_le_bytes());
        let crc = crc32c::crc32c(&out[0..44]);
        out[44..48].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes; `None` when magic or header CRC do not match, or `buf` is shorter than a
    /// header.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        let buf = buf.get(..GROUP_HEADER)?;
        if buf[0..4] != GROUP_MAGIC {
            return None;
        }
        let stored = u32::from_le_bytes(buf[44..48].try_into().ok()?);
        if crc32c::crc32c(&buf[0..44]) != stored {
            return None;
        }
        let u64_at = |i: usize| buf[i..i + 8].try_into().ok().map(u64::from_le_bytes);
        let u32_at = |i: usize| buf[i..i + 4].try_into().ok().map(u32::from_le_bytes);
        Some(Self {
            lsn: u64_at(4)?,
            len: u32_at(12)?,
            records: u32_at(16)?,
            body_crc: u32_at(20)?,
            durable: u64_at(24)?,
            db_id: u64_at(32)?,
            epoch: u32_at(40)?,
        })
    }
}

/// One redo operation of a commit record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedoOp {
    /// Set `key` to `val` in table `table`.
    Put {
        /// Table id (0 = catalog).
        table: u32,
        /// Key.
        key: Vec<u8>,
        /// Value as stored in the leaf.
        val: Val,
    },
    /// Remove `key` from table `table`.
    Delete {
        /// Table id.
        table: u32,
        /// Key.
        key: Vec<u8>,
    },
    /// Table `table` was dropped: later redo skips it.
    DropTable {
        /// Table id.
        table: u32,
    },
}

/// A commit record: the logical operations of one transaction plus full images of every page
/// it changed structurally (splits, merges, allocations, overflow pages, the meta page).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitRecord {
    /// Commit timestamp.
    pub cts: u64,
    /// Logical redo.
    pub ops: Vec<RedoOp>,
    /// Page images: `(page id, node)`.
    pub images: Vec<(u64, Node)>,
}

/// Record kind byte of a commit record.
pub const REC_COMMIT: u8 = 1;

impl CommitRecord {
    /// Encodes a full record with header; the LSN and CRC are patched by [`seal_record`].
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        self.encode_into(&mut b);
        b
    }

    /// [`CommitRecord::encode`] into `b` (cleared first): a committer reuses one buffer, so a
    /// bulk load's 100 KiB records do not each take fresh memory the kernel must zero.
    pub fn encode_into(&self, b: &mut Vec<u8>) {
        // Sized up front: one allocation, not a realloc at every doubling.
        let ops: usize = self
            .ops
            .iter()
            .map(|op| match op {
                RedoOp::Put { key, val, .. } => 7 + key.len() + val.encoded_len(),
                RedoOp::Delete { key, .. } => 7 + key.len(),
                RedoOp::DropTable { .. } => 5,
            })
            .sum();
        let images: usize = self.images.iter().map(|(_, n)| 13 + n.payload_len()).sum();
        b.clear();
        b.reserve(RECORD_HEADER + 12 + ops + 4 + images);
        b.resize(RECORD_HEADER, 0);
        put_u64(b, self.cts);
        put_u32(b, self.ops.len() as u32);
        for op in &self.ops {
            match op {
                RedoOp::Put { table, key, val } => {
                    b.push(1);
                    put_u32(b, *table);
                    put_u16(b, key.len() as u16);
                    b.extend_from_slice(key);
                    put_val(b, val);
                }
                RedoOp::Delete { table, key } => {
                    b.push(2);
                    put_u32(b, *table);
                    put_u16(b, key.len() as u16);
                    b.extend_from_slice(key);
                }
                RedoOp::DropTable { table } => {
                    b.push(3);
                    put_u32(b, *table);
                }
            }
        }
        put_u32(b, self.images.len() as u32);
        for (id, node) in &self.images {
            put_u64(b, *id);
            b.push(node.kind() as u8);
            put_u32(b, node.payload_len() as u32);
            encode_node(node, b);
        }
        let len = b.len() as u32;
        b[0..4].copy_from_slice(&len.to_le_bytes());
        b[16] = REC_COMMIT;
        // The CRC of everything after the LSN, computed here, outside the log's lock; sealing
        // extends it by the LSN's eight bytes.
        let body_crc = crc32c::crc32c(&b[16..]);
        b[4..8].copy_from_slice(&body_crc.to_le_bytes());
    }

    /// Decodes a record body (after the header).
    pub fn decode(body: &[u8]) -> Option<Self> {
        let mut r = Reader::new(body);
        let cts = r.u64()?;
        let n = r.u32()? as usize;
        // Reserve no more than the bytes left can hold (an op takes at least 5, an image 13):
        // a damaged count must not ask for gigabytes.
        let mut ops = Vec::with_capacity(n.min(r.remaining() / 5));
        for _ in 0..n {
            let op = match r.u8()? {
                1 => {
                    let table = r.u32()?;
                    let kl = r.u16()? as usize;
                    let key = r.bytes(kl)?.to_vec();
                    let val = read_val(&mut r)?;
                    RedoOp::Put { table, key, val }
                }
                2 => {
                    let table = r.u32()?;
                    let kl = r.u16()? as usize;
                    RedoOp::Delete {
                        table,
                        key: r.bytes(kl)?.to_vec(),
                    }
                }
                3 => RedoOp::DropTable { table: r.u32()? },
                _ => return None,
            };
            ops.push(op);
        }
        let n = r.u32()? as usize;
        let mut images = Vec::with_capacity(n.min(r.remaining() / 13));
        for _ in 0..n {
            let id = r.u64()?;
            let kind = r.u8()?;
            let len = r.u32()? as usize;
            let node = decode_node(kind, r.bytes(len)?)?;
            images.push((id, node));
        }
        if r.remaining() != 0 {
            return None;
        }
        Some(Self { cts, ops, images })
    }
}

/// Writes the LSN and CRC into a record made by [`CommitRecord::encode`]:
/// `[len u32][crc u32][lsn u64][kind u8]body`, the CRC being CRC32C of `kind, body, lsn` (so
/// that sealing under the log's lock costs eight bytes of CRC, whatever the record's size).
pub fn seal_record(rec: &mut [u8], lsn: u64) {
    let lsn_bytes = lsn.to_le_bytes();
    rec[8..16].copy_from_slice(&lsn_bytes);
    let body_crc = u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]);
    let crc = crc32c::crc32c_append(body_crc, &lsn_bytes);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The CRC a sealed record must carry.
fn record_crc(rec: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&rec[16..]), &rec[8..16])
}

/// Parses the records of a group body; `Err` names the problem.
pub fn parse_records(
    body: &[u8],
    first_lsn: u64,
) -> std::result::Result<Vec<(u64, CommitRecord)>, String> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < body.len() {
        let lsn = first_lsn
            .checked_add(pos as u64)
            .ok_or_else(|| format!("record at LSN {first_lsn} + {pos} is past the last LSN"))?;
        let rest = &body[pos..];
        if rest.len() < RECORD_HEADER {
            return Err(format!("record at LSN {lsn} truncated"));
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len < RECORD_HEADER || len > rest.len() {
            return Err(format!("record at LSN {lsn} has bad length {len}"));
        }
        let rec = &rest[..len];
        let crc = u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]);
        if record_crc(rec) != crc {
            return Err(format!("record at LSN {lsn} fails its checksum"));
        }
        let stored_lsn = u64::from_le_bytes(rec[8..16].try_into().map_err(|_| "lsn")?);
        if stored_lsn != lsn {
            return Err(format!("record at LSN {lsn} says LSN {stored_lsn}"));
        }
        if rec[16] != REC_COMMIT {
            return Err(format!("record at LSN {lsn} has unknown kind {}", rec[16]));
        }
        let cr = CommitRecord::decode(&rec[RECORD_HEADER..])
            .ok_or_else(|| format!("record at LSN {lsn} does not decode"))?;
        out.push((lsn, cr));
        pos += len;
    }
    Ok(out)
}

/// The records of a damaged group body that pass their own checks, found by trying every byte
/// offset past a damaged one (a record names its own LSN). Only for the sabotage
/// `salvage-torn-log`: keeping a record that follows a lost one breaks the log's promise that
/// recovery keeps a prefix of the commit order.
pub(crate) fn salvage_records(body: &[u8], first_lsn: u64) -> Vec<(u64, CommitRecord)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + RECORD_HEADER <= body.len() {
        let rest = &body[pos..];
        let Some(lsn) = first_lsn.checked_add(pos as u64) else {
            break;
        };
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let names_itself = rest[8..16] == lsn.to_le_bytes();
        if names_itself && (RECORD_HEADER..=rest.len()).contains(&len) {
            if let Ok(mut one) = parse_records(&rest[..len], lsn) {
                out.append(&mut one);
                pos += len;
                continue;
            }
        }
        pos += 1;
    }
    out
}

/// Rounds up to a sector multiple.
pub fn align_up(x: u64) -> u64 {
    x.div_ceil(SECTOR as u64) * SECTOR as u64
}

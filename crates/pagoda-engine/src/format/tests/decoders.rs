//! The decoders of the log, the superblock and the flash cache on arbitrary bytes: never a
//! panic, and damage to a valid encoding is refused (or, where the structure carries no
//! checksum of its own, said so below). Pages are covered in `tests.rs`.

use super::prop::{node, val};
use super::*;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

/// Up to three sectors of anything: shorter than any header (often, since those are the
/// lengths a decoder indexing a fixed header would panic on), a header, more than one.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..128), vec(any::<u8>(), 0..3 * SECTOR)]
}

/// Any LSN, often one near the last there is (where adding an offset overflows).
fn any_lsn() -> impl Strategy<Value = u64> {
    prop_oneof![any::<u64>(), u64::MAX - 3 * SECTOR as u64..=u64::MAX]
}

fn flip(buf: &mut [u8], bit: usize) {
    buf[bit / 8] ^= 1 << (bit % 8);
}

fn op() -> impl Strategy<Value = RedoOp> {
    prop_oneof![
        (any::<u32>(), vec(any::<u8>(), 0..40), val()).prop_map(|(table, key, val)| RedoOp::Put {
            table,
            key,
            val
        }),
        (any::<u32>(), vec(any::<u8>(), 0..40))
            .prop_map(|(table, key)| RedoOp::Delete { table, key }),
        any::<u32>().prop_map(|table| RedoOp::DropTable { table }),
    ]
}

fn record() -> impl Strategy<Value = CommitRecord> {
    (
        any::<u64>(),
        vec(op(), 0..6),
        vec((any::<u64>(), node()), 0..3),
    )
        .prop_map(|(cts, ops, images)| CommitRecord { cts, ops, images })
}

/// A group as the log writer lays it out at `lsn`: header, then the sealed records. Returns
/// the group and each record's LSN and byte range in the body.
fn group(recs: &[CommitRecord], lsn: u64) -> (Vec<u8>, Vec<(u64, std::ops::Range<usize>)>) {
    let first = lsn + GROUP_HEADER as u64;
    let mut body = Vec::new();
    let mut at = Vec::new();
    for r in recs {
        let mut b = r.encode();
        let rec_lsn = first + body.len() as u64;
        seal_record(&mut b, rec_lsn);
        at.push((rec_lsn, body.len()..body.len() + b.len()));
        body.extend_from_slice(&b);
    }
    let h = GroupHeader {
        lsn,
        len: (GROUP_HEADER + body.len()) as u32,
        records: recs.len() as u32,
        body_crc: crc32c::crc32c(&body),
        durable: lsn,
        db_id: 42,
        epoch: 3,
    };
    let mut g = vec![0u8; GROUP_HEADER];
    h.encode(&mut g);
    g.extend_from_slice(&body);
    (g, at)
}

/// The record of `at` holding body byte `i`.
fn lsn_of(at: &[(u64, std::ops::Range<usize>)], i: usize) -> u64 {
    at.iter()
        .find(|(_, r)| r.contains(&i))
        .map(|(l, _)| *l)
        .unwrap()
}

fn superblock() -> impl Strategy<Value = Superblock> {
    (any::<[u64; 8]>(), any::<u32>(), 12u32..=16, any::<bool>()).prop_map(
        |(v, dw_pages, shift, flash_dependent)| Superblock {
            generation: v[0],
            page_size: 1 << shift,
            checkpoint_lsn: v[1],
            checkpoint_cts: v[2],
            log_capacity: v[3],
            dw_start: v[4],
            dw_pages,
            meta_page: v[5],
            db_id: v[6],
            flash_cache_id: v[7],
            flash_seq: v[0] ^ v[1],
            flash_dependent,
        },
    )
}

/// Bytes of the superblock, the log header and the cache header that their CRCs cover
/// (CRC included); the rest of the sector is zeros no reader looks at.
const SB_COVERED: usize = SB_BODY + 4;
const LOG_HEADER_COVERED: usize = 8 + 4 + 16 + 4 + 4;
const CACHE_HEADER_COVERED: usize = 8 + 4 + 8 * 3 + 4 * 7 + 4;

fn entry() -> impl Strategy<Value = SlotEntry> {
    (any::<[u64; 3]>(), any::<u32>(), any::<bool>()).prop_map(|(v, crc, dirty)| SlotEntry {
        pid: v[0],
        lsn: v[1],
        seq: v[2],
        crc,
        dirty,
    })
}

fn segment() -> impl Strategy<Value = SegmentHeader> {
    (
        any::<u64>(),
        any::<u64>(),
        vec(option::of(entry()), 0..=MAX_PER_SEGMENT),
    )
        .prop_map(|(cache_id, seq, slots)| SegmentHeader {
            cache_id,
            seq,
            slots,
        })
}

fn directory() -> impl Strategy<Value = DirCheckpoint> {
    (
        any::<u64>(),
        any::<u32>(),
        vec((any::<u32>(), entry()), 0..40),
    )
        .prop_map(|(next_seq, head, entries)| DirCheckpoint {
            next_seq,
            head,
            entries,
        })
}

fn cache_header() -> impl Strategy<Value = CacheHeader> {
    (any::<[u64; 3]>(), any::<[u32; 7]>()).prop_map(|(v, w)| CacheHeader {
        generation: v[0],
        db_id: v[1],
        cache_id: v[2],
        page_size: w[0],
        segments: w[1],
        per_segment: w[2],
        dir_sectors: w[3],
        dir_bytes: w[4],
        dir_crc: w[5],
        layout: w[6],
    })
}

/// A record whose end is the last LSN there is: the next record's LSN would overflow, and is
/// refused by name rather than wrapping (or panicking in a debug build).
#[test]
fn records_past_the_last_lsn_are_refused() {
    let rec = CommitRecord::default().encode();
    let first = u64::MAX - rec.len() as u64 + 1;
    let mut sealed = rec.clone();
    seal_record(&mut sealed, first);
    assert_eq!(
        parse_records(&sealed, first).unwrap(),
        vec![(first, CommitRecord::default())]
    );
    let two = [sealed, rec].concat();
    let e = parse_records(&two, first).unwrap_err();
    assert!(e.contains("past the last LSN"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // ---- the log device header ----

    #[test]
    fn log_header_refuses_arbitrary_bytes(b in bytes()) {
        prop_assert!(decode_log_header(&b).is_err());
    }

    #[test]
    fn log_header_refuses_any_flipped_bit(db_id in any::<u64>(), capacity in any::<u64>(),
                                          epoch in any::<u32>(), bit in 0..LOG_HEADER_COVERED * 8) {
        let h = LogHeader { db_id, capacity, epoch };
        let mut b = encode_log_header(&h);
        prop_assert_eq!(decode_log_header(&b), Ok(h));
        flip(&mut b, bit);
        prop_assert!(decode_log_header(&b).is_err());
    }

    #[test]
    fn log_header_refuses_truncations(db_id in any::<u64>(), cut in 0..LOG_HEADER_COVERED) {
        let b = encode_log_header(&LogHeader { db_id, capacity: 1 << 20, epoch: 1 });
        let e = decode_log_header(&b[..cut]).unwrap_err();
        prop_assert!(e.contains("log header"), "{}", e);
    }

    // ---- log groups and records ----

    #[test]
    fn group_header_refuses_arbitrary_bytes(b in bytes()) {
        prop_assert_eq!(GroupHeader::decode(&b), None);
    }

    /// Every header bit is under the header CRC; every body bit under the body CRC and, record
    /// by record, under each record's own CRC, which names the record's LSN.
    #[test]
    fn group_detects_any_flipped_bit(recs in vec(record(), 1..4), lsn in 0u64..1 << 50,
                                     bit in any::<usize>()) {
        let (mut g, at) = group(&recs, lsn);
        let h = GroupHeader::decode(&g).unwrap();
        prop_assert_eq!(h.len as usize, g.len());
        let bit = bit % (g.len() * 8);
        flip(&mut g, bit);
        if bit < GROUP_HEADER * 8 {
            prop_assert_eq!(GroupHeader::decode(&g), None);
        } else {
            prop_assert_eq!(GroupHeader::decode(&g), Some(h));
            let body = &g[GROUP_HEADER..];
            prop_assert_ne!(crc32c::crc32c(body), h.body_crc);
            let want = format!("record at LSN {} ", lsn_of(&at, bit / 8 - GROUP_HEADER));
            let e = parse_records(body, lsn + GROUP_HEADER as u64).unwrap_err();
            prop_assert!(e.starts_with(&want), "{} (wanted {})", e, want);
        }
    }

    #[test]
    fn group_header_refuses_truncations(lsn in 0u64..1 << 50, cut in 0..GROUP_HEADER) {
        let (g, _) = group(&[], lsn);
        prop_assert!(GroupHeader::decode(&g).is_some());
        prop_assert_eq!(GroupHeader::decode(&g[..cut]), None);
    }

    /// A body cut at a record boundary is a shorter valid body (the group header's length and
    /// body CRC catch that); cut anywhere else, the cut record is named.
    #[test]
    fn truncated_bodies_name_the_cut_record(recs in vec(record(), 1..4), cut in any::<usize>()) {
        let (g, at) = group(&recs, 8192);
        let body = &g[GROUP_HEADER..];
        let cut = cut % body.len();
        let first = 8192 + GROUP_HEADER as u64;
        match at.iter().position(|(_, r)| r.start == cut) {
            Some(n) => {
                let got = parse_records(&body[..cut], first).unwrap();
                let want: Vec<_> = at[..n].iter().map(|(l, _)| *l).zip(recs.iter().cloned()).collect();
                prop_assert_eq!(got, want);
            }
            None => {
                let want = format!("record at LSN {} ", lsn_of(&at, cut));
                let e = parse_records(&body[..cut], first).unwrap_err();
                prop_assert!(e.starts_with(&want), "{} (wanted {})", e, want);
            }
        }
    }

    /// Any LSN, any bytes: an error naming the LSN where parsing stopped (an empty body has
    /// no records).
    #[test]
    fn records_refuse_arbitrary_bytes(b in bytes(), first in any_lsn()) {
        match parse_records(&b, first) {
            Ok(recs) => prop_assert!(b.is_empty() && recs.is_empty()),
            Err(e) => prop_assert!(e.starts_with("record at LSN "), "{}", e),
        }
        let _ = CommitRecord::decode(&b);
    }

    /// Salvage (the sabotage `salvage-torn-log`) tries every offset of a damaged body: on any
    /// bytes and LSN it never panics, and a valid body gives back every record.
    #[test]
    fn salvage_takes_any_bytes(b in bytes(), first in any_lsn(), recs in vec(record(), 0..3)) {
        for (lsn, _) in salvage_records(&b, first) {
            prop_assert!(lsn >= first && lsn - first < b.len() as u64);
        }
        let (g, at) = group(&recs, 4096);
        let got = salvage_records(&g[GROUP_HEADER..], 4096 + GROUP_HEADER as u64);
        let want: Vec<_> = at.iter().map(|(l, _)| *l).zip(recs).collect();
        prop_assert_eq!(got, want);
    }

    /// A record whose length, LSN and CRC check but whose body is garbage: decoded or refused
    /// by its LSN, never a panic.
    #[test]
    fn garbage_record_bodies_are_named(kind in 0u8..3, payload in vec(any::<u8>(), 0..600),
                                       lsn in any_lsn()) {
        let mut rec = vec![0u8; RECORD_HEADER];
        rec[16] = kind;
        rec.extend_from_slice(&payload);
        let len = rec.len() as u32;
        rec[0..4].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c(&rec[16..]);
        rec[4..8].copy_from_slice(&crc.to_le_bytes());
        seal_record(&mut rec, lsn);
        match parse_records(&rec, lsn) {
            Ok(got) => {
                prop_assert_eq!(kind, REC_COMMIT);
                prop_assert_eq!(got.len(), 1);
                prop_assert_eq!(got[0].0, lsn);
            }
            Err(e) => {
                let want = format!("record at LSN {lsn} ");
                prop_assert!(e.starts_with(&want), "{}", e);
            }
        }
    }

    // ---- the superblock (both copies) ----

    #[test]
    fn superblock_refuses_arbitrary_bytes(b in bytes()) {
        prop_assert!(Superblock::decode(&b).is_err());
        prop_assert_eq!(Superblock::version(&b), None);
        prop_assert!(check_version(&b).is_ok());
    }

    /// The bytes after the CRC are not covered: a flip there changes nothing a reader uses.
    #[test]
    fn superblock_refuses_any_flipped_bit(sb in superblock(), bit in 0..SECTOR * 8) {
        let mut b = sb.encode();
        prop_assert_eq!(Superblock::decode(&b), Ok(sb.clone()));
        flip(&mut b, bit);
        if bit < SB_COVERED * 8 {
            prop_assert!(Superblock::decode(&b).is_err());
            prop_assert_eq!(Superblock::version(&b), None);
        } else {
            prop_assert_eq!(Superblock::decode(&b), Ok(sb));
        }
    }

    #[test]
    fn superblock_refuses_truncations(sb in superblock(), cut in 0..SB_COVERED) {
        let b = sb.encode();
        let e = Superblock::decode(&b[..cut]).unwrap_err();
        prop_assert!(e.contains("superblock"), "{}", e);
        prop_assert_eq!(Superblock::version(&b[..cut]), None);
    }

    /// An intact superblock naming a page size the engine cannot make is refused, not used to
    /// divide by.
    #[test]
    fn superblock_refuses_impossible_page_sizes(sb in superblock(), ps in any::<u32>()) {
        let mut b = sb.encode();
        b[12..16].copy_from_slice(&ps.to_le_bytes());
        let crc = crc32c::crc32c(&b[..SB_BODY]);
        b[SB_BODY..SB_COVERED].copy_from_slice(&crc.to_le_bytes());
        let ok = ps.is_power_of_two() && (4096..=65536).contains(&ps);
        match Superblock::decode(&b) {
            Ok(got) => prop_assert!(ok && got.page_size == ps),
            Err(e) => prop_assert!(!ok && e.contains(&format!("page size {ps}")), "{}", e),
        }
    }

    /// The two copies as the data device holds them: garbage in one does not hide an older
    /// format version in the other.
    #[test]
    fn both_copies_with_garbage(sb in superblock(), junk in vec(any::<u8>(), SECTOR),
                                garbage_first in any::<bool>()) {
        let mut v2 = sb.encode();
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32c::crc32c(&v2[..SB_BODY_V2]);
        v2[SB_BODY_V2..SB_BODY_V2 + 4].copy_from_slice(&crc.to_le_bytes());
        for (copy, want_v2) in [(sb.encode(), false), (v2, true)] {
            let both = if garbage_first {
                [junk.clone(), copy].concat()
            } else {
                [copy, junk.clone()].concat()
            };
            let r = check_version(&both);
            if want_v2 {
                let refused = matches!(r, Err(Error::UnsupportedFormat { found: 2, supported: 3 }));
                prop_assert!(refused, "{:?}", r);
            } else {
                prop_assert!(r.is_ok());
            }
        }
    }

    // ---- the flash cache ----

    #[test]
    fn cache_header_refuses_arbitrary_bytes(b in bytes()) {
        prop_assert!(CacheHeader::decode(&b).is_err());
    }

    #[test]
    fn cache_header_refuses_flips_and_truncations(h in cache_header(),
                                                  bit in 0..CACHE_HEADER_COVERED * 8,
                                                  cut in 0..CACHE_HEADER_COVERED) {
        let mut b = h.encode();
        prop_assert_eq!(CacheHeader::decode(&b), Ok(h));
        prop_assert!(CacheHeader::decode(&b[..cut]).is_err());
        flip(&mut b, bit);
        prop_assert!(CacheHeader::decode(&b).is_err());
    }

    #[test]
    fn segment_header_refuses_arbitrary_bytes(b in bytes()) {
        prop_assert_eq!(SegmentHeader::decode(&b), None);
    }

    /// The header CRC covers the fixed part and the slots in use; the rest of the sector is
    /// not read.
    #[test]
    fn segment_header_refuses_flips_and_truncations(seg in segment(), bit in any::<usize>(),
                                                    cut in 0..SECTOR) {
        let mut b = seg.encode();
        prop_assert_eq!(SegmentHeader::decode(&b), Some(seg.clone()));
        prop_assert_eq!(SegmentHeader::decode(&b[..cut]), None);
        let covered = 8 + 8 + 8 + 2 + seg.slots.len() * 29 + 4;
        let bit = bit % (covered * 8);
        flip(&mut b, bit);
        prop_assert_eq!(SegmentHeader::decode(&b), None);
    }

    /// A segment header whose CRC checks over garbage slots (as a bug writing it would leave):
    /// refused, or decoded with exactly the slots it counts.
    #[test]
    fn resealed_garbage_segments_never_panic(n in any::<u16>(), junk in vec(any::<u8>(), SECTOR)) {
        let mut b = junk;
        b[..8].copy_from_slice(&SEG_MAGIC);
        b[24..26].copy_from_slice(&n.to_le_bytes());
        let body = 26 + usize::from(n) * 29;
        if body + 4 <= SECTOR {
            let crc = crc32c::crc32c(&b[..body]);
            b[body..body + 4].copy_from_slice(&crc.to_le_bytes());
        }
        if let Some(h) = SegmentHeader::decode(&b) {
            prop_assert_eq!(h.slots.len(), usize::from(n));
        }
    }

    #[test]
    fn directory_refuses_arbitrary_bytes(b in bytes(), magic in any::<bool>()) {
        let mut b = b;
        if magic && b.len() >= 8 {
            b[..8].copy_from_slice(&DIR_MAGIC);
        }
        if let Some(d) = DirCheckpoint::decode(&b) {
            // Only an exact encoding decodes (the entry count accounts for every byte).
            prop_assert_eq!(d.encode(), b);
        }
    }

    /// The directory checkpoint has no CRC of its own: the cache header holds its length and
    /// CRC (`dir_bytes`, `dir_crc`) and the rebuild checks them first. What the decoder itself
    /// owes: a flipped bit never reads back as the same directory, and any other length is
    /// refused.
    #[test]
    fn directory_flips_and_truncations(d in directory(), bit in any::<usize>(),
                                       cut in any::<usize>(), extra in 1usize..64) {
        let mut b = d.encode();
        prop_assert_eq!(DirCheckpoint::decode(&b), Some(d.clone()));
        prop_assert_eq!(DirCheckpoint::decode(&b[..cut % b.len()]), None);
        let mut longer = b.clone();
        longer.resize(b.len() + extra, 0);
        prop_assert_eq!(DirCheckpoint::decode(&longer), None);
        let bit = bit % (b.len() * 8);
        flip(&mut b, bit);
        prop_assert_ne!(DirCheckpoint::decode(&b), Some(d));
    }
}

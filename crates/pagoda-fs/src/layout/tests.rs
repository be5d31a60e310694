//! The mount's image decoders on arbitrary bytes, truncations and flipped bits: never a panic,
//! and an error that says what is wrong.
#![allow(clippy::unwrap_used)]

use super::*;
use proptest::collection::vec;
use proptest::prelude::*;

const CAPACITY: u64 = 1 << 16;

fn flip(buf: &mut [u8], bit: usize) {
    buf[bit / 8] ^= 1 << (bit % 8);
}

fn corrupt_says(r: Result<impl std::fmt::Debug>, what: &str) -> std::result::Result<(), String> {
    match r {
        Err(FsError::Corrupt(m)) if m.contains(what) => Ok(()),
        other => Err(format!("wanted damage naming {what:?}, got {other:?}")),
    }
}

fn time() -> impl Strategy<Value = Time> {
    (any::<i64>(), 0u32..1_000_000_000).prop_map(|(secs, nanos)| Time { secs, nanos })
}

/// An inode as decoding rebuilds it: the fields not stored keep `Inode::new`'s values, a
/// file's block map ends at its last allocated block, links are at least one (encoding skips
/// unlinked inodes).
fn inode() -> impl Strategy<Value = Inode> {
    let body = prop_oneof![
        vec(0u64..CAPACITY, 0..20).prop_map(|mut blocks| {
            while blocks.last() == Some(&0) {
                blocks.pop();
            }
            (Kind::File, blocks, BTreeMap::new(), Vec::new())
        }),
        vec(("[a-z]{1,12}", any::<u64>()), 0..6).prop_map(|es| (
            Kind::Dir,
            Vec::new(),
            es.into_iter().collect(),
            Vec::new()
        )),
        vec(any::<u8>(), 0..60).prop_map(|t| (Kind::Symlink, Vec::new(), BTreeMap::new(), t)),
    ];
    (
        body,
        any::<[u32; 3]>(),
        1u32..=u32::MAX,
        any::<u64>(),
        (time(), time(), time()),
    )
        .prop_map(
            |((kind, blocks, entries, target), [perm, uid, gid], nlink, size, (a, m, c))| {
                let mut i = Inode::new(kind, perm, uid, gid);
                i.nlink = nlink;
                i.size = size;
                (i.atime, i.mtime, i.ctime) = (a, m, c);
                i.blocks = blocks;
                i.entries = entries;
                i.target = target;
                i
            },
        )
}

fn table() -> impl Strategy<Value = (u64, BTreeMap<u64, Inode>)> {
    (any::<u64>(), vec((any::<u64>(), inode()), 0..6))
        .prop_map(|(next, inodes)| (next, inodes.into_iter().collect()))
}

/// The payload of a slot image (after its header sector), as long as the header says.
fn payload(img: &[u8]) -> &[u8] {
    let (_, len, _) = decode_header(img).unwrap();
    &img[SECTOR..SECTOR + len]
}

fn valid_super() -> Super {
    Super::for_capacity(CAPACITY).unwrap()
}

/// Bytes of the superblock and of a slot header that their CRCs cover (CRC included).
const SUPER_COVERED: usize = 32;
const HEADER_COVERED: usize = 32;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn super_refuses_arbitrary_bytes(b in vec(any::<u8>(), 0..2 * SECTOR), magic in any::<bool>()) {
        let mut b = b;
        if magic && b.len() >= 8 {
            b[..8].copy_from_slice(SB_MAGIC);
            prop_assert!(matches!(Super::decode(&b), Err(FsError::Corrupt(_))));
        } else {
            prop_assert!(matches!(Super::decode(&b), Err(FsError::NotFormatted)));
        }
    }

    #[test]
    fn super_refuses_flips_and_truncations(bit in 0..SUPER_COVERED * 8, cut in 8..SUPER_COVERED) {
        let mut b = valid_super().encode();
        prop_assert_eq!(Super::decode(&b).unwrap(), valid_super());
        prop_assert!(corrupt_says(Super::decode(&b[..cut]), "superblock").is_ok());
        flip(&mut b, bit);
        let r = Super::decode(&b);
        if bit < 64 {
            prop_assert!(matches!(r, Err(FsError::NotFormatted)));
        } else {
            prop_assert!(corrupt_says(r, "superblock checksum").is_ok());
        }
    }

    /// Intact (resealed) superblocks naming any version and geometry: refused unless version 1
    /// with slots that fit; the addresses of an accepted one never overflow.
    #[test]
    fn resealed_supers_describe_a_layout_that_fits(version in 0u32..3, capacity in any::<u64>(),
                                                   slot in any::<u64>()) {
        let mut b = valid_super().encode();
        b[8..12].copy_from_slice(&version.to_le_bytes());
        b[12..20].copy_from_slice(&capacity.to_le_bytes());
        b[20..28].copy_from_slice(&slot.to_le_bytes());
        let crc = crc32c::crc32c(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        match Super::decode(&b) {
            Ok(sb) => {
                prop_assert_eq!(version, 1);
                prop_assert!(sb.slot_start(1) < sb.data_start() && sb.data_start() < sb.capacity);
            }
            Err(FsError::Corrupt(m)) => prop_assert!(m.starts_with("superblock: "), "{}", m),
            Err(e) => prop_assert!(false, "{}", e),
        }
    }

    #[test]
    fn slot_header_refuses_arbitrary_bytes(b in vec(any::<u8>(), 0..2 * SECTOR)) {
        prop_assert_eq!(decode_header(&b), None);
    }

    #[test]
    fn slot_header_refuses_flips_and_truncations((next, inodes) in table(), gen in any::<u64>(),
                                                 bit in 0..HEADER_COVERED * 8,
                                                 cut in 0..HEADER_COVERED) {
        let mut img = encode_meta(gen, next, &inodes);
        let (g, len, crc) = decode_header(&img).unwrap();
        prop_assert_eq!(g, gen);
        prop_assert_eq!(crc, crc32c::crc32c(payload(&img)));
        prop_assert_eq!(SECTOR + len.div_ceil(SECTOR) * SECTOR, img.len());
        prop_assert_eq!(decode_header(&img[..cut]), None);
        flip(&mut img, bit);
        prop_assert_eq!(decode_header(&img), None);
    }

    #[test]
    fn metadata_roundtrips((next, inodes) in table()) {
        let img = encode_meta(1, next, &inodes);
        prop_assert_eq!(decode_meta(payload(&img), CAPACITY).unwrap(), (next, inodes));
    }

    /// The payload's length is in its header and exact: shorter or longer is refused, with the
    /// place where it went wrong.
    #[test]
    fn metadata_refuses_other_lengths((next, inodes) in table(), cut in any::<usize>(),
                                      extra in vec(any::<u8>(), 1..40)) {
        let img = encode_meta(1, next, &inodes);
        let p = payload(&img);
        let short = &p[..cut % p.len()];
        prop_assert!(corrupt_says(decode_meta(short, CAPACITY), "metadata ends early").is_ok());
        let long = [p, &extra[..]].concat();
        let r = decode_meta(&long, CAPACITY);
        prop_assert!(corrupt_says(r, "bytes after its").is_ok());
    }

    /// The payload carries no checksum of its own: the slot header's CRC covers it and `open`
    /// checks that first. What the decoder owes on any bytes, flipped or not: no panic, no
    /// allocation beyond the device, an error saying what is wrong.
    #[test]
    fn metadata_on_arbitrary_bytes((next, inodes) in table(), bits in vec(any::<usize>(), 1..4),
                                   junk in vec(any::<u8>(), 0..600)) {
        let img = encode_meta(1, next, &inodes);
        let mut p = payload(&img).to_vec();
        for bit in bits {
            let bit = bit % (p.len() * 8);
            flip(&mut p, bit);
        }
        if let Err(e) = decode_meta(&p, CAPACITY) {
            prop_assert!(matches!(e, FsError::Corrupt(_)), "{}", e);
        }
        prop_assert!(matches!(decode_meta(&junk, CAPACITY), Err(FsError::Corrupt(_))));
    }

    /// One file extent with any numbers: refused naming its inode unless inside the device.
    #[test]
    fn extents_stay_inside_the_device(f in any::<u64>(), s in any::<u64>(), len in any::<u64>()) {
        let mut p = Vec::new();
        for v in [2, 1, 7] {
            put(&mut p, v);
        }
        p.push(0);
        p.extend_from_slice(&[0; 16]);
        put(&mut p, 0);
        p.extend_from_slice(&[0; 36]);
        for v in [1, f, s, len] {
            put(&mut p, v);
        }
        let fits = |a: u64| a.checked_add(len).is_some_and(|e| e <= CAPACITY);
        match decode_meta(&p, CAPACITY) {
            Ok((_, inodes)) => {
                prop_assert!(fits(f) && fits(s));
                prop_assert!(inodes[&7].blocks.len() as u64 <= CAPACITY);
            }
            Err(e) => {
                prop_assert!(!(fits(f) && fits(s)));
                prop_assert!(corrupt_says(Err::<(), _>(e), "inode 7: extent").is_ok());
            }
        }
    }
}

#[test]
fn an_inode_stored_twice_is_refused() {
    let mut i = Inode::new(Kind::Symlink, 0, 0, 0);
    i.target = b"x".to_vec();
    let img = encode_meta(1, 9, &BTreeMap::from([(5, i)]));
    let mut p = payload(&img).to_vec();
    let one = p[16..].to_vec();
    p[8..16].copy_from_slice(&2u64.to_le_bytes());
    p.extend_from_slice(&one);
    let r = decode_meta(&p, CAPACITY);
    assert!(corrupt_says(r, "inode 5 is stored twice").is_ok());
}

#[test]
fn a_time_of_a_second_or_more_of_nanoseconds_is_refused() {
    let mut i = Inode::new(Kind::Symlink, 0, 0, 0);
    i.mtime = Time {
        secs: i64::MAX,
        nanos: 1_000_000_000,
    };
    let img = encode_meta(1, 9, &BTreeMap::from([(5, i)]));
    let r = decode_meta(payload(&img), CAPACITY);
    assert!(corrupt_says(r, "a time of 1000000000 nanoseconds at byte ").is_ok());
}

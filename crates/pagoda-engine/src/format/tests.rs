//! Round trips and damage detection of the encoders and decoders.
#![allow(clippy::unwrap_used)]

use super::*;

mod decoders;

#[test]
fn page_roundtrip_and_crc() {
    let p = Page {
        id: 7,
        lsn: 99,
        node: Node::Leaf(vec![
            (Key::from_slice(b"a"), Val::Inline(b"x".to_vec())),
            (
                Key::from_slice(b"b"),
                Val::Overflow {
                    first: 3,
                    len: 100000,
                },
            ),
        ]),
    };
    let mut buf = Vec::new();
    encode_page(&p, 4096, &mut buf);
    assert_eq!(decode_page(&buf, 7).unwrap(), p);
    assert!(decode_page(&buf, 8).is_err());
    buf[100] ^= 1;
    assert!(matches!(
        decode_page(&buf, 7),
        Err(Error::Corruption { page_id: 7, .. })
    ));
}

#[test]
fn record_roundtrip() {
    let r = CommitRecord {
        cts: 5,
        ops: vec![
            RedoOp::Put {
                table: 1,
                key: b"k".to_vec(),
                val: Val::Inline(b"v".to_vec()),
            },
            RedoOp::Delete {
                table: 2,
                key: b"z".to_vec(),
            },
            RedoOp::DropTable { table: 3 },
        ],
        images: vec![(
            9,
            Node::Internal {
                keys: vec![Key::from_slice(b"m")],
                children: vec![1, 2],
            },
        )],
    };
    let mut b = r.encode();
    seal_record(&mut b, 4096 + 32);
    let got = parse_records(&b, 4096 + 32).unwrap();
    assert_eq!(got, vec![(4096 + 32, r)]);
    b[30] ^= 0x40;
    assert!(parse_records(&b, 4096 + 32).is_err());
}

#[test]
fn superblock_roundtrip() {
    let sb = Superblock {
        generation: 3,
        page_size: 16384,
        checkpoint_lsn: 8192,
        checkpoint_cts: 4,
        log_capacity: 1 << 20,
        dw_start: 4,
        dw_pages: 64,
        meta_page: 68,
        db_id: 42,
        flash_cache_id: 7,
        flash_seq: 99,
        flash_dependent: true,
    };
    let b = sb.encode();
    assert_eq!(Superblock::decode(&b).unwrap(), sb);
    let mut c = b.clone();
    c[20] ^= 1;
    assert!(Superblock::decode(&c).is_err());
}

#[test]
fn meta_without_a_trunk_keeps_the_old_layout() {
    let old = Meta {
        next_page: 90,
        next_table: 3,
        free: vec![70, 71],
        free_trunk: 0,
    };
    let mut b = Vec::new();
    encode_node(&Node::Meta(old.clone()), &mut b);
    // next_page, next_table, count, two entries: as written before trunks existed.
    assert_eq!(b.len(), 8 + 4 + 4 + 16);
    assert_eq!(
        decode_node(Kind::Meta as u8, &b),
        Some(Node::Meta(old.clone()))
    );
    let with = Meta {
        free_trunk: 77,
        ..old
    };
    b.clear();
    encode_node(&Node::Meta(with.clone()), &mut b);
    assert_eq!(b.len(), Node::Meta(with.clone()).payload_len());
    assert_eq!(decode_node(Kind::Meta as u8, &b), Some(Node::Meta(with)));
    // A trailing part of a trunk pointer is damage.
    b.pop();
    assert_eq!(decode_node(Kind::Meta as u8, &b), None);
}

mod prop {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    pub(super) fn val() -> impl Strategy<Value = Val> {
        prop_oneof![
            vec(any::<u8>(), 0..40).prop_map(Val::Inline),
            (any::<u64>(), any::<u64>()).prop_map(|(first, len)| Val::Overflow { first, len }),
        ]
    }

    /// Every node kind, small enough for a 4 KiB page.
    pub(super) fn node() -> impl Strategy<Value = Node> {
        prop_oneof![
            (
                any::<u64>(),
                any::<u32>(),
                vec(any::<u64>(), 0..40),
                any::<u64>()
            )
                .prop_map(|(next_page, next_table, free, free_trunk)| Node::Meta(
                    Meta {
                        next_page,
                        next_table,
                        free,
                        free_trunk,
                    }
                )),
            // Keys up to 40 bytes: inline (up to 24) and spilled ones.
            vec((vec(any::<u8>(), 0..40), val()), 0..12).prop_map(|es| Node::Leaf(
                es.into_iter().map(|(k, v)| (Key::from_vec(k), v)).collect()
            )),
            (
                any::<u64>(),
                vec((vec(any::<u8>(), 0..40), any::<u64>()), 0..20)
            )
                .prop_map(|(first, es)| {
                    let (keys, rest): (Vec<_>, Vec<_>) =
                        es.into_iter().map(|(k, c)| (Key::from_vec(k), c)).unzip();
                    let mut children = vec![first];
                    children.extend(rest);
                    Node::Internal { keys, children }
                }),
            (any::<u64>(), vec(any::<u8>(), 0..200))
                .prop_map(|(next, data)| Node::Overflow { next, data }),
            (any::<u64>(), vec(any::<u64>(), 0..40))
                .prop_map(|(next, free)| Node::Trunk { next, free }),
        ]
    }

    /// Re-seals a page image after its header or payload was changed on purpose.
    fn reseal(buf: &mut [u8]) {
        let crc = crc32c::crc32c(&buf[4..]);
        buf[0..4].copy_from_slice(&crc.to_le_bytes());
    }

    proptest! {
        #[test]
        fn pages_roundtrip(node in node(), id in 0u64..1 << 40, lsn in any::<u64>()) {
            let page = Page { id, lsn, node };
            let mut buf = Vec::new();
            encode_page(&page, 4096, &mut buf);
            prop_assert_eq!(decode_page(&buf, id).unwrap(), page);
        }

        #[test]
        fn images_roundtrip_through_the_log(images in vec((any::<u64>(), node()), 0..4)) {
            let rec = CommitRecord { cts: 1, ops: Vec::new(), images };
            let mut b = rec.encode();
            seal_record(&mut b, 4096);
            prop_assert_eq!(parse_records(&b, 4096).unwrap(), vec![(4096, rec)]);
        }

        #[test]
        fn any_flipped_bit_is_corruption(node in node(), bit in any::<u32>()) {
            let page = Page { id: 9, lsn: 1, node };
            let mut buf = Vec::new();
            encode_page(&page, 4096, &mut buf);
            let used = PAGE_HEADER + page.node.payload_len();
            let bit = bit as usize % (used * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            let is_corrupt = matches!(decode_page(&buf, 9), Err(Error::Corruption { page_id: 9, .. }));
            prop_assert!(is_corrupt);
        }

        /// A payload cut short (with a valid checksum) is a typed error, never a panic; only a
        /// meta page may lose exactly its trunk pointer and still decode (the old layout).
        #[test]
        fn truncated_payloads_are_corruption(node in node(), cut in 1usize..64) {
            let page = Page { id: 9, lsn: 1, node };
            let mut buf = Vec::new();
            encode_page(&page, 4096, &mut buf);
            let len = page.node.payload_len();
            let short = len.saturating_sub(cut);
            buf[28..32].copy_from_slice(&(short as u32).to_le_bytes());
            reseal(&mut buf);
            match decode_page(&buf, 9) {
                Err(Error::Corruption { page_id: 9, .. }) => {}
                Ok(Page { node: Node::Meta(m), .. }) => {
                    prop_assert_eq!(cut, 8);
                    prop_assert_eq!(m.free_trunk, 0);
                }
                other => prop_assert!(false, "cut {} of {}: {:?}", cut, len, other),
            }
        }

        #[test]
        fn garbage_payloads_never_panic(kind in 0u8..8, bytes in vec(any::<u8>(), 0..300)) {
            let _ = decode_node(kind, &bytes);
            let mut buf = vec![0u8; 4096];
            buf[4..8].copy_from_slice(&PAGE_MAGIC);
            buf[8..16].copy_from_slice(&9u64.to_le_bytes());
            buf[24] = kind;
            buf[28..32].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
            buf[PAGE_HEADER..PAGE_HEADER + bytes.len()].copy_from_slice(&bytes);
            reseal(&mut buf);
            let ok = matches!(decode_page(&buf, 9), Ok(_) | Err(Error::Corruption { page_id: 9, .. }));
            prop_assert!(ok);
        }
    }
}

#[test]
fn flash_structures_roundtrip() {
    let h = CacheHeader {
        generation: 5,
        db_id: 1,
        cache_id: 2,
        page_size: 16384,
        segments: 10,
        per_segment: 16,
        dir_sectors: 3,
        dir_bytes: 100,
        dir_crc: 0xdead,
        layout: 1,
    };
    let b = h.encode();
    assert_eq!(CacheHeader::decode(&b).unwrap(), h);
    let mut c = b.clone();
    c[17] ^= 1;
    assert!(CacheHeader::decode(&c).is_err());
    let e = SlotEntry {
        pid: 9,
        lsn: 77,
        seq: 3,
        crc: 0x1234,
        dirty: true,
    };
    let seg = SegmentHeader {
        cache_id: 2,
        seq: 3,
        slots: vec![Some(e), None, Some(SlotEntry { dirty: false, ..e })],
    };
    let b = seg.encode();
    assert_eq!(SegmentHeader::decode(&b).unwrap(), seg);
    let mut c = b.clone();
    c[40] ^= 1;
    assert!(SegmentHeader::decode(&c).is_none());
    let full = SegmentHeader {
        slots: vec![Some(e); MAX_PER_SEGMENT],
        ..seg
    };
    assert_eq!(full.encode().len(), SECTOR);
    assert_eq!(SegmentHeader::decode(&full.encode()).unwrap(), full);
    let d = DirCheckpoint {
        next_seq: 10,
        head: 4,
        entries: vec![(0, e), (17, e)],
    };
    let b = d.encode();
    assert_eq!(b.len(), DirCheckpoint::bytes_for(2));
    assert_eq!(DirCheckpoint::decode(&b).unwrap(), d);
    assert!(DirCheckpoint::decode(&b[..b.len() - 3]).is_none());
}

//! Round trips and damage detection of the encoders and decoders.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn page_roundtrip_and_crc() {
    let p = Page {
        id: 7,
        lsn: 99,
        node: Node::Leaf(vec![
            (b"a".to_vec(), Val::Inline(b"x".to_vec())),
            (
                b"b".to_vec(),
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
                keys: vec![b"m".to_vec()],
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
    };
    let b = sb.encode();
    assert_eq!(Superblock::decode(&b).unwrap(), sb);
    let mut c = b.clone();
    c[20] ^= 1;
    assert!(Superblock::decode(&c).is_err());
}

//! A leaf encoded as its entries come, for the bulk load: no decoded entries in between, and the
//! page written straight into the load's run buffer. The bytes are those [`super::encode_page`]
//! gives for the `Node::Leaf` of the same entries (a unit test compares them).

use super::{put_u16, put_u32, put_u64, Kind, PAGE_HEADER, PAGE_MAGIC};

/// A leaf's payload: the entry count, then the entries in the leaf format.
#[derive(Debug)]
pub(crate) struct LeafBytes {
    payload: Vec<u8>,
    count: u32,
}

impl LeafBytes {
    pub(crate) fn new() -> Self {
        Self {
            payload: vec![0; 4],
            count: 0,
        }
    }

    /// Payload bytes so far (the count included), as `Node::payload_len` counts them.
    pub(crate) fn len(&self) -> usize {
        self.payload.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes an inline entry takes (`leaf_entry_len` of `Val::Inline`).
    pub(crate) fn inline_len(key: &[u8], value: &[u8]) -> usize {
        2 + key.len() + 1 + 4 + value.len()
    }

    /// Appends an entry whose value is stored in the leaf.
    pub(crate) fn push_inline(&mut self, key: &[u8], value: &[u8]) {
        self.key(key);
        self.payload.push(0);
        put_u32(&mut self.payload, value.len() as u32);
        self.payload.extend_from_slice(value);
    }

    /// Appends an entry whose value is the overflow chain from page `first`, `len` bytes.
    pub(crate) fn push_overflow(&mut self, key: &[u8], first: u64, len: u64) {
        self.key(key);
        self.payload.push(1);
        put_u64(&mut self.payload, first);
        put_u64(&mut self.payload, len);
    }

    fn key(&mut self, key: &[u8]) {
        self.count += 1;
        put_u16(&mut self.payload, key.len() as u16);
        self.payload.extend_from_slice(key);
    }

    /// Appends the page `id` (LSN `lsn`) holding this leaf to `out`: header, payload, zeros to
    /// `page_size`, checksum.
    pub(crate) fn encode_into(&mut self, id: u64, lsn: u64, page_size: usize, out: &mut Vec<u8>) {
        self.payload[..4].copy_from_slice(&self.count.to_le_bytes());
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&PAGE_MAGIC);
        put_u64(out, id);
        put_u64(out, lsn);
        out.push(Kind::Leaf as u8);
        out.extend_from_slice(&[0; 3]);
        put_u32(out, self.payload.len() as u32);
        debug_assert_eq!(out.len() - start, PAGE_HEADER);
        out.extend_from_slice(&self.payload);
        debug_assert!(out.len() - start <= page_size, "leaf {id} overfull");
        out.resize(start + page_size, 0);
        let crc = crc32c::crc32c(&out[start + 4..]);
        out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::LeafBytes;
    use crate::format::{encode_page, leaf_entry_len, Key, Node, Page, Val};

    #[test]
    fn a_leaf_encoded_entry_by_entry_is_the_page_encode_page_writes() {
        let entries: Vec<(Key, Val)> = vec![
            (Key::from_slice(b"a"), Val::Inline(vec![1, 2, 3])),
            (Key::from_slice(&[7u8; 40]), Val::Inline(Vec::new())),
            (
                Key::from_slice(b"big"),
                Val::Overflow {
                    first: 99,
                    len: 70_000,
                },
            ),
            (Key::from_slice(b"z"), Val::Inline(vec![9; 500])),
        ];
        let mut lb = LeafBytes::new();
        let mut len = 4;
        for (k, v) in &entries {
            match v {
                Val::Inline(b) => {
                    assert_eq!(LeafBytes::inline_len(k, b), leaf_entry_len(k, v));
                    lb.push_inline(k, b);
                }
                Val::Overflow { first, len } => lb.push_overflow(k, *first, *len),
            }
            len += leaf_entry_len(k, v);
            assert_eq!(lb.len(), len);
        }
        let mut ours = vec![0xAB; 3];
        lb.encode_into(42, 7, 4096, &mut ours);
        let mut theirs = Vec::new();
        let page = Page {
            id: 42,
            lsn: 7,
            node: Node::Leaf(entries),
        };
        encode_page(&page, 4096, &mut theirs);
        assert_eq!(&ours[..3], &[0xAB; 3], "what the buffer held stays");
        assert_eq!(&ours[3..], &theirs[..]);
    }
}

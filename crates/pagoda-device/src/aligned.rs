//! A growable byte buffer whose start is 4 KiB-aligned, made without `unsafe`: a slightly
//! larger vector and the aligned window inside it. O_DIRECT needs such buffers; a caller that
//! builds its writes in one (the engine's log) spares the file device a bounce copy.

/// The alignment: one sector, what O_DIRECT asks on the file systems we accept.
pub const ALIGN: usize = 4096;

/// A 4 KiB-aligned, growable byte buffer.
#[derive(Debug, Default)]
pub struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// An empty buffer with room for `cap` bytes.
    pub fn with_capacity(cap: usize) -> Self {
        let mut b = Self::default();
        b.reserve(cap);
        b
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes it can hold without growing.
    pub fn capacity(&self) -> usize {
        self.storage.len().saturating_sub(self.start)
    }

    /// Empties the buffer (keeps its memory).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Makes room for `more` bytes beyond the current length (doubling, as a vector does).
    pub fn reserve(&mut self, more: usize) {
        let need = self.len + more;
        if need <= self.capacity() {
            return;
        }
        let cap = need.max(2 * self.capacity()).max(ALIGN);
        let storage = vec![0u8; cap + ALIGN];
        // A fresh vector of at least ALIGN + 1 bytes always has an aligned byte in its first
        // ALIGN (align_offset of a u8 pointer is exact).
        let start = storage.as_ptr().align_offset(ALIGN).min(ALIGN);
        let mut next = Self {
            storage,
            start,
            len: self.len,
        };
        next.as_mut_slice().copy_from_slice(self.as_slice());
        *self = next;
    }

    /// Sets the length, zero-filling new bytes.
    pub fn resize(&mut self, len: usize) {
        if len > self.len {
            self.reserve(len - self.len);
            let (s, old) = (self.start, self.len);
            self.storage[s + old..s + len].fill(0);
        }
        self.len = len;
    }

    /// Appends bytes.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        let old = self.len;
        self.reserve(bytes.len());
        self.len += bytes.len();
        let s = self.start;
        self.storage[s + old..s + self.len].copy_from_slice(bytes);
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    /// The bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let s = self.start;
        &mut self.storage[s..s + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_aligned_and_keeps_its_bytes_as_it_grows() {
        let mut b = AlignedBuf::default();
        let mut want = Vec::new();
        for i in 0..2000u32 {
            let chunk = i.to_le_bytes();
            b.extend_from_slice(&chunk);
            want.extend_from_slice(&chunk);
            assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
        }
        assert_eq!(b.as_slice(), &want[..]);
        b.resize(want.len() + 10);
        assert!(b.as_slice()[want.len()..].iter().all(|&x| x == 0));
        b.clear();
        assert!(b.is_empty());
        b.resize(5);
        assert_eq!(b.as_slice(), &[0; 5]);
    }
}

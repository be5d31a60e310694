//! A small hand-written row format shared by the TPC-C and LinkBench tables.
//!
//! Fields are written in declaration order: integers as fixed-width little-endian, strings
//! and byte strings as a 2-byte (or 4-byte for [`Enc::bytes32`]) little-endian length and
//! their bytes, options as a 0/1 byte then the value. No field names or versions: a row is
//! read back only by the code that wrote it. Fast, allocation-light and dependency-free.
//!
//! Keys are different: they are big-endian so byte order equals numeric order.

use crate::store::StoreError;

/// Builds a big-endian, order-preserving key from 32-bit parts.
pub fn key32(parts: &[u32]) -> Vec<u8> {
    let mut k = Vec::with_capacity(parts.len() * 4);
    for p in parts {
        k.extend_from_slice(&p.to_be_bytes());
    }
    k
}

/// Row encoder.
#[derive(Debug, Default)]
pub struct Enc(Vec<u8>);

impl Enc {
    /// An empty row.
    pub fn new() -> Self {
        Enc(Vec::with_capacity(64))
    }
    /// The encoded row.
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
    /// A byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// A u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// An i64.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A string of at most 65,535 bytes (longer ones are cut; rows never hold such).
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes16(v.as_bytes())
    }
    /// A byte string of at most 65,535 bytes.
    pub fn bytes16(&mut self, v: &[u8]) -> &mut Self {
        let n = v.len().min(u16::MAX as usize);
        self.0.extend_from_slice(&(n as u16).to_le_bytes());
        self.0.extend_from_slice(&v[..n]);
        self
    }
    /// A byte string of any length below 4 GiB.
    pub fn bytes32(&mut self, v: &[u8]) -> &mut Self {
        let n = v.len().min(u32::MAX as usize);
        self.0.extend_from_slice(&(n as u32).to_le_bytes());
        self.0.extend_from_slice(&v[..n]);
        self
    }
    /// An optional u32.
    pub fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            Some(x) => self.u8(1).u32(x),
            None => self.u8(0),
        }
    }
    /// An optional i64.
    pub fn opt_i64(&mut self, v: Option<i64>) -> &mut Self {
        match v {
            Some(x) => self.u8(1).i64(x),
            None => self.u8(0),
        }
    }
}

/// Row decoder; every read fails cleanly on a short or malformed row.
#[derive(Debug)]
pub struct Dec<'a> {
    buf: &'a [u8],
    table: &'static str,
}

impl<'a> Dec<'a> {
    /// Reads a row of `table` (named in errors).
    pub fn new(buf: &'a [u8], table: &'static str) -> Self {
        Dec { buf, table }
    }

    fn bad(&self, what: &str) -> StoreError {
        StoreError::Other(format!(
            "corrupt row in table `{}`: {what}; reload the database",
            self.table
        ))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        if self.buf.len() < n {
            return Err(self.bad("row too short"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], StoreError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, StoreError> {
        Ok(self.array::<1>()?[0])
    }
    /// A u32.
    pub fn u32(&mut self) -> Result<u32, StoreError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// A u64.
    pub fn u64(&mut self) -> Result<u64, StoreError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// An i64.
    pub fn i64(&mut self) -> Result<i64, StoreError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    /// A string.
    pub fn str(&mut self) -> Result<String, StoreError> {
        let b = self.bytes16()?;
        String::from_utf8(b).map_err(|_| self.bad("string is not UTF-8"))
    }
    /// A byte string written by [`Enc::bytes16`].
    pub fn bytes16(&mut self) -> Result<Vec<u8>, StoreError> {
        let n = u16::from_le_bytes(self.array()?) as usize;
        Ok(self.take(n)?.to_vec())
    }
    /// A byte string written by [`Enc::bytes32`].
    pub fn bytes32(&mut self) -> Result<Vec<u8>, StoreError> {
        let n = u32::from_le_bytes(self.array()?) as usize;
        Ok(self.take(n)?.to_vec())
    }
    /// An optional u32.
    pub fn opt_u32(&mut self) -> Result<Option<u32>, StoreError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.u32()?)),
            _ => Err(self.bad("bad option tag")),
        }
    }
    /// An optional i64.
    pub fn opt_i64(&mut self) -> Result<Option<i64>, StoreError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.i64()?)),
            _ => Err(self.bad("bad option tag")),
        }
    }
    /// Fails unless the whole row was read.
    pub fn end(&self) -> Result<(), StoreError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(self.bad("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short_rows_fail() {
        let mut e = Enc::new();
        e.u8(7)
            .u32(1)
            .u64(2)
            .i64(-3)
            .str("héllo")
            .bytes32(b"xyz")
            .opt_u32(None)
            .opt_i64(Some(-9));
        let row = e.finish();
        let mut d = Dec::new(&row, "t");
        assert_eq!(d.u8().unwrap(), 7);
        assert_eq!(d.u32().unwrap(), 1);
        assert_eq!(d.u64().unwrap(), 2);
        assert_eq!(d.i64().unwrap(), -3);
        assert_eq!(d.str().unwrap(), "héllo");
        assert_eq!(d.bytes32().unwrap(), b"xyz");
        assert_eq!(d.opt_u32().unwrap(), None);
        assert_eq!(d.opt_i64().unwrap(), Some(-9));
        d.end().unwrap();
        let mut short = Dec::new(&row[..row.len() - 1], "t");
        let r: Result<(), StoreError> = (|| {
            short.u8()?;
            short.u32()?;
            short.u64()?;
            short.i64()?;
            short.str()?;
            short.bytes32()?;
            short.opt_u32()?;
            short.opt_i64()?;
            Ok(())
        })();
        assert!(r.unwrap_err().to_string().contains("table `t`"));
    }

    #[test]
    fn keys_sort_numerically() {
        assert!(key32(&[1, 255]) < key32(&[1, 256]));
        assert!(key32(&[1, u32::MAX]) < key32(&[2, 0]));
    }
}

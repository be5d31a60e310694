//! LinkBench tables on a [`Store`](crate::store::Store): keys (big-endian) and rows
//! ([`codec`](crate::codec) format), payloads and the run's clock.

use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::Rng;

use super::{COUNT, LINK, NODE};
use crate::codec::{Dec, Enc};
use crate::dist::lognormal_size;
use crate::store::StoreError;

pub(crate) fn node_key(id: u64) -> Vec<u8> {
    id.to_be_bytes().to_vec()
}

pub(crate) fn count_key(id1: u64, t: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(12);
    k.extend_from_slice(&id1.to_be_bytes());
    k.extend_from_slice(&t.to_be_bytes());
    k
}

pub(crate) fn link_key(id1: u64, t: u32, id2: u64) -> Vec<u8> {
    let mut k = count_key(id1, t);
    k.extend_from_slice(&id2.to_be_bytes());
    k
}

pub(crate) fn link_time_key(id1: u64, t: u32, time: u64, id2: u64) -> Vec<u8> {
    let mut k = count_key(id1, t);
    k.extend_from_slice(&time.to_be_bytes());
    k.extend_from_slice(&id2.to_be_bytes());
    k
}

/// A node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Node type.
    pub node_type: u32,
    /// Version, bumped by updates.
    pub version: u64,
    /// Last write time.
    pub time: u64,
    /// Payload.
    pub data: Vec<u8>,
}

impl Node {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.u32(self.node_type)
            .u64(self.version)
            .u64(self.time)
            .bytes32(&self.data);
        e.finish()
    }
    pub(crate) fn decode(b: &[u8]) -> Result<Self, StoreError> {
        let mut d = Dec::new(b, NODE);
        let n = Node {
            node_type: d.u32()?,
            version: d.u64()?,
            time: d.u64()?,
            data: d.bytes32()?,
        };
        d.end()?;
        Ok(n)
    }
}

/// A link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// 1 visible, 0 hidden.
    pub visibility: u8,
    /// Version, bumped by updates.
    pub version: u64,
    /// Last write time (its position in the time index).
    pub time: u64,
    /// Payload.
    pub data: Vec<u8>,
}

impl Link {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.u8(self.visibility)
            .u64(self.version)
            .u64(self.time)
            .bytes16(&self.data);
        e.finish()
    }
    pub(crate) fn decode(b: &[u8]) -> Result<Self, StoreError> {
        let mut d = Dec::new(b, LINK);
        let l = Link {
            visibility: d.u8()?,
            version: d.u64()?,
            time: d.u64()?,
            data: d.bytes16()?,
        };
        d.end()?;
        Ok(l)
    }
    pub(crate) fn index_value(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.u64(self.version).bytes16(&self.data);
        e.finish()
    }
}

pub(crate) fn encode_count(count: u64, version: u64, time: u64) -> Vec<u8> {
    let mut e = Enc::new();
    e.u64(count).u64(version).u64(time);
    e.finish()
}

pub(crate) fn decode_count(b: &[u8]) -> Result<(u64, u64, u64), StoreError> {
    let mut d = Dec::new(b, COUNT);
    let r = (d.u64()?, d.u64()?, d.u64()?);
    d.end()?;
    Ok(r)
}

pub(crate) fn payload(rng: &mut SmallRng, median: f64, sigma: f64, max: usize) -> Vec<u8> {
    let n = lognormal_size(rng, median, sigma, max);
    (0..n).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

/// Strictly increasing microsecond timestamps.
#[derive(Debug)]
pub(crate) struct Clock(AtomicU64);

impl Clock {
    pub(crate) fn new() -> Self {
        Clock(AtomicU64::new(0))
    }
    pub(crate) fn tick(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let mut prev = self.0.load(Ordering::Relaxed);
        loop {
            let next = now.max(prev + 1);
            match self
                .0
                .compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(p) => prev = p,
            }
        }
    }
}

//! Options of the FaCE flash cache tier: which device, how large, which policy.

use crate::error::{Error, Result};
use pagoda_device::DeviceRef;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Replacement policy of the flash cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlashPolicy {
    /// FaCE: a FIFO ring written sequentially at its head in batches; several versions of a
    /// page may sit in the ring, only the newest is valid; the head writes a valid page that is
    /// newer than the disk copy back to the data device before reusing its slot.
    #[default]
    Face,
    /// FaCE with Group Second Chance: a valid page at the head that was read since it was
    /// written is re-appended in the same sequential batch instead of leaving the cache.
    FaceGsc,
    /// The conventional flash cache, for comparison: LRU replacement, each page written into
    /// the least recently used slot (random writes on the cache device).
    Lru,
}

impl FromStr for FlashPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "face" => Ok(Self::Face),
            "face-gsc" => Ok(Self::FaceGsc),
            "lru" => Ok(Self::Lru),
            _ => Err(Error::config(format!(
                "flash cache policy '{s}': use face, face-gsc or lru"
            ))),
        }
    }
}

impl fmt::Display for FlashPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Face => "face",
            Self::FaceGsc => "face-gsc",
            Self::Lru => "lru",
        })
    }
}

/// Which pages leaving the DRAM buffer go to the flash cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlashPages {
    /// Only dirty pages (the FaCE paper's "FaCE Dirty Only").
    #[default]
    Dirty,
    /// Dirty pages and clean pages evicted from DRAM.
    All,
}

impl FromStr for FlashPages {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "dirty" => Ok(Self::Dirty),
            "all" => Ok(Self::All),
            _ => Err(Error::config(format!(
                "flash cache pages '{s}': use dirty or all"
            ))),
        }
    }
}

impl fmt::Display for FlashPages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Dirty => "dirty",
            Self::All => "all",
        })
    }
}

/// A flash cache tier between the buffer pool and the data device.
///
/// Every page write goes to the cache device first; the data device is written only from a
/// durable flash copy, so a torn data-page write is always repaired from flash and the engine
/// runs `TornMode::None` safely (the double-write area is not used; `doublewrite` and
/// `doublewrite-full` are refused).
/// The cache keeps its directory on its device and stays warm across restarts when the device
/// keeps data.
#[derive(Clone)]
pub struct FlashCacheOptions {
    /// The cache device (e.g. an emulated `sata-ssd`, or `file:PATH`); not the data or log
    /// device.
    pub device: DeviceRef,
    /// Bytes of the device the cache uses (`None`: the whole device).
    pub size_bytes: Option<u64>,
    /// Replacement policy.
    pub policy: FlashPolicy,
    /// Which pages are cached.
    pub pages: FlashPages,
}

impl fmt::Debug for FlashCacheOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlashCacheOptions")
            .field("device", &self.device.describe())
            .field("size_bytes", &self.size_bytes)
            .field("policy", &self.policy)
            .field("pages", &self.pages)
            .finish()
    }
}

impl FlashCacheOptions {
    /// A FaCE dirty-only cache on the whole of `device`.
    pub fn new(device: DeviceRef) -> Self {
        Self {
            device,
            size_bytes: None,
            policy: FlashPolicy::Face,
            pages: FlashPages::Dirty,
        }
    }

    /// Uses `bytes` of the device.
    pub fn size_bytes(mut self, bytes: u64) -> Self {
        self.size_bytes = Some(bytes);
        self
    }

    /// Sets the replacement policy.
    pub fn policy(mut self, p: FlashPolicy) -> Self {
        self.policy = p;
        self
    }

    /// Sets which pages are cached.
    pub fn pages(mut self, p: FlashPages) -> Self {
        self.pages = p;
        self
    }

    /// Checks the cache on its own (its size against its device); how it combines with the
    /// rest of the options is `DbOptions::validate`'s to check.
    pub(crate) fn validate(&self) -> Result<()> {
        let caps = self.device.caps();
        if let Some(s) = self.size_bytes {
            if s > caps.capacity_bytes() {
                return Err(Error::config(format!(
                    "flash cache size {s} bytes is larger than its device {} ({} bytes): \
                     give a smaller --flash-cache-size or a larger device",
                    self.device.describe(),
                    caps.capacity_bytes()
                )));
            }
        }
        Ok(())
    }
}

/// Whether two handles name the same device: the same object, or the same file (two RAM or
/// emulated devices with equal settings are still two devices).
pub(crate) fn same_device(a: &DeviceRef, b: &DeviceRef) -> bool {
    let path = |d: &DeviceRef| {
        let s = d.describe();
        s.starts_with("file:")
            .then(|| s.split('(').next().unwrap_or_default().to_string())
    };
    Arc::ptr_eq(a, b) || path(a).is_some_and(|p| Some(p) == path(b))
}

//! The flash cache's counters, as [`crate::Db::stats`] reports them: defined by the cache
//! that fills them in.

/// The FaCE flash cache tier, when one is configured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FlashCacheStats {
    /// Replacement policy (`face`, `face-gsc`, `lru`).
    pub policy: String,
    /// Which pages are cached (`dirty`, `all`).
    pub pages: String,
    /// Page slots in the ring.
    pub slots: u64,
    /// DRAM misses served from the flash cache.
    pub hits: u64,
    /// DRAM misses that went to the data device.
    pub misses: u64,
    /// hits / (hits + misses): of the pages DRAM missed, the share flash had.
    pub hit_ratio: f64,
    /// Pages written to the cache device (appended or placed).
    pub ring_page_writes: u64,
    /// Bytes written to the cache device for pages and slot headers.
    pub ring_bytes: u64,
    /// Of the ring's write requests, the share that began where the previous one ended.
    pub sequential_fraction: f64,
    /// Pages written back from flash to the data device before their slot was reused.
    pub write_backs: u64,
    /// Group Second Chance: referenced pages re-appended at the head instead of leaving.
    pub gsc_reappends: u64,
    /// Slots holding the newest copy of a page now.
    pub valid_slots: u64,
    /// Of those, copies newer than the data device's.
    pub dirty_slots: u64,
    /// Slots holding an older version of a page, or never used, as a share of all slots.
    pub invalid_fraction: f64,
    /// Directory checkpoints written to the cache device, and their bytes.
    pub dir_checkpoints: u64,
    /// Bytes of directory checkpoints written.
    pub dir_checkpoint_bytes: u64,
    /// Slots found damaged (checksum) or unreadable when read.
    pub corrupt_slots: u64,
    /// Of those, reads served from the data device's copy instead, as new as the slot's (a
    /// slot holding the only newest copy fails the read, naming the slot and the page).
    pub data_rereads: u64,
    /// Whether the cache came up warm at open (its directory rebuilt) rather than empty.
    pub warm_start: bool,
    /// Why it started cold, when it did.
    pub start_note: Option<String>,
    /// Milliseconds the directory rebuild took at open.
    pub rebuild_ms: f64,
    /// Ring segments read by the rebuild (after the directory checkpoint).
    pub rebuild_segments: u64,
    /// Valid pages the rebuilt directory held.
    pub rebuild_pages: u64,
}

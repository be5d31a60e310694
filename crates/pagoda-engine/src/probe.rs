//! Probes for crash testing: engine events an observer can follow (which recovery step or
//! checkpoint is running when a power cut hits), and deliberate sabotage of one safety step, so
//! that the crash test can prove it catches the absence of each step.
//!
//! Public only with the `fault-injection` feature. Without it nothing can set an observer or
//! a sabotage, and [`is`] is a constant `false`, so the sabotaged branches compile away.

// Without the feature the sabotage names, parsing and observer events go unused.
#![cfg_attr(not(feature = "fault-injection"), allow(dead_code))]

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A step of [`crate::Db::open`] (reported before it starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryStep {
    /// Reading the superblock and scanning the log.
    ScanLog,
    /// Writing the log header with this open's epoch (groups left from before a crash can
    /// then never continue the new log).
    NewEpoch,
    /// Copying valid double-write pages over torn pages.
    RepairDoublewrite,
    /// Replaying the log into the buffer pool (evictions write pages).
    Redo,
    /// Rebuilding the flash cache's directory (its last directory checkpoint plus the ring
    /// segments written after it).
    FlashRebuild,
    /// The checkpoint that ends recovery.
    Checkpoint,
}

impl fmt::Display for RecoveryStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ScanLog => "open: scan log",
            Self::NewEpoch => "open: new log epoch",
            Self::RepairDoublewrite => "open: double-write repair",
            Self::Redo => "open: redo",
            Self::FlashRebuild => "open: flash cache rebuild",
            Self::Checkpoint => "open: checkpoint",
        })
    }
}

/// Something the engine is about to do or has done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A step of recovery at open starts.
    Recovery(RecoveryStep),
    /// Open finished; the database is usable.
    Opened,
    /// A checkpoint starts (from any thread).
    CheckpointBegin,
    /// A checkpoint ended (successfully or not).
    CheckpointEnd,
    /// The flash cache starts a step (from any thread).
    Flash(FlashStep),
    /// An error reached the database's failure path (the text of the error). Every one is
    /// reported, not only the first cause that [`crate::Db::failure`] keeps: a test can then
    /// tell whether an error it injected was heard even when another failure came first.
    Failed(String),
    /// A read was served another way after an error or failed check (the flash cache's page
    /// from the data device): what went wrong, naming the slot and the device's error.
    Served(String),
}

/// A step of the flash cache, reported before it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlashStep {
    /// Appending a batch of pages at the ring's head (or placing them, policy `lru`).
    Append,
    /// Writing pages back from flash to the data device before their slots are reused.
    WriteBack,
    /// Writing the directory checkpoint and the cache header.
    DirCheckpoint,
}

impl fmt::Display for FlashStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Append => "flash cache: append batch",
            Self::WriteBack => "flash cache: write-back",
            Self::DirCheckpoint => "flash cache: directory checkpoint",
        })
    }
}

/// Receives [`Event`]s (called inline on the engine's threads: keep it short).
pub type Observer = Arc<dyn Fn(Event) + Send + Sync>;

/// One safety step of the engine removed on purpose. Only for `pagoda crashtest --sabotage`:
/// a crash test that passes with a sabotage could not catch the bug the step prevents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sabotage {
    /// The log is written but never synced; commits count as durable anyway.
    SkipLogSync,
    /// Torn mode doublewrite writes pages in place without the double-write copy.
    SkipDoublewrite,
    /// A commit is acknowledged (or its pipelined ticket resolved) before its record is durable.
    AckBeforeDurable,
    /// The cleaner writes pages without waiting for the log to be durable up to their LSN.
    SkipWalRule,
    /// A checkpoint moves the redo start without writing the dirty pages first.
    SkipCheckpointFlush,
    /// Torn mode atomic writes pages without the atomic-write hint (so they can tear).
    NonAtomicPages,
    /// Commits become visible to other transactions before they are durable.
    VisibleBeforeDurable,
    /// Redo lets the cleaner write a page before every operation of its log record is
    /// applied to it (the defect the crash test found first).
    RedoPartialWrites,
    /// A B+tree merge empties the sibling it absorbs without marking it in progress, so the
    /// cleaner may write it (empty, under its old LSN) before the merge's record is logged
    /// (crash-test defect C); the cleaner also runs right after each merge, so that the race,
    /// rare with the step missing alone, happens every time.
    MergeUnmarkedSibling,
    /// The log scan ignores group epochs, so a group left in flight by a crash may be read as
    /// the continuation of a later open's log.
    IgnoreLogEpoch,
    /// Recovery salvages the intact records of a torn log group (and goes on to the groups
    /// after it) instead of ending the log there, so a commit can survive one before it that
    /// was lost: with lazy commits, a crash then loses a commit in the middle.
    SalvageTornLog,
    /// The log scan takes every damaged group for the torn tail of a crash, without looking
    /// for a later group that proves it synced: bit rot in an acknowledged group silently
    /// loses its commits and those after it.
    LogDamageAsTail,
    /// The flash cache reuses a ring segment before the pages it wrote back to the data device
    /// are synced there, so a power cut can lose the only copy of a page.
    FlashUnsyncedWriteback,
    /// The flash cache's restart rebuild trusts the slots written after its directory
    /// checkpoint without checking their checksums, so a slot torn by a power cut is used.
    FlashTrustTornSlots,
    /// A commit record that carries page images leaves out all of its logical operations,
    /// not only those whose key ends in an imaged leaf, so redo loses the changes made in
    /// place to leaves the record did not image.
    DropOpsOfImagedRecords,
    /// Torn mode doublewrite leaves out of the double-write area every page some commit
    /// record ever imaged, also when that record lies before the redo start (so recovery
    /// never reads it): a torn write of such a page has neither a copy nor an image.
    DoublewriteOldImages,
    /// A bulk load logs the record that installs its new tree without syncing the pages it
    /// wrote straight to the data device first, so a power cut can leave the installed tree
    /// pointing at pages that never reached the disk.
    BulkSkipSync,
    /// A page read from disk is used even when its checksum fails (the check that catches
    /// bit rot and torn pages on read).
    TrustPageChecksum,
    /// A page read from disk is used even when its header names another page (the check that
    /// catches a misdirected write on read).
    TrustPageId,
    /// A failed log sync is retried, and the commits it covered are acknowledged when the
    /// retry succeeds (the "fsyncgate" mistake: the failed sync may have dropped the writes).
    RetryFailedLogSync,
    /// A failed page write (or the data sync after it) counts as done: the pages are clean.
    IgnoreWriteError,
    /// A page whose read fails is taken as an empty leaf (as if unreadable meant never used)
    /// instead of failing the read.
    IgnoreReadError,
    /// The flash cache goes on writing after one of its writes, write-backs or syncs failed,
    /// from a ring state that no longer matches the device (the next batch overwrites the
    /// head segment, the only copy of the pages just written there).
    FlashWriteAfterFailure,
    /// A group-commit round acknowledges the commits it wrote before its sync completes (a
    /// follower, or a pipelined ticket, is told "durable" while its record may still be lost).
    AckBeforeSync,
    /// A log round writes past the ring's ready prefix without making the room ready first,
    /// so the thread that zero-fills a sparse log ahead of the writer later writes zeros over
    /// acknowledged groups.
    WriteLogPastReady,
    /// A failed log write counts as done: the round goes on to sync and acknowledges its
    /// commits, whose records never reached the log.
    IgnoreLogWriteError,
    /// After a page write-out or its data sync failed, later write-outs go on (a batch
    /// already waiting for the cleaner writes the double-write area over the only copies of
    /// the failed batch's torn pages).
    WriteOutAfterFailure,
    /// A checkpoint writes its redo start into the newer superblock copy only, then reuses
    /// the log before it (as before issue 42): the older copy, which recovery falls back to
    /// when the newest is damaged, names a redo start whose log may be overwritten.
    SuperblockOneCopy,
    /// Recovery puts any intact double-write copy over a damaged home page, also one older
    /// than the redo start (left over from an earlier batch), whose later changes redo does
    /// not replay: an acknowledged update vanishes when the home held a newer version.
    DoublewriteStaleCopy,
}

impl Sabotage {
    /// Every sabotage.
    pub const ALL: [Sabotage; 29] = [
        Self::SkipLogSync,
        Self::SkipDoublewrite,
        Self::AckBeforeDurable,
        Self::SkipWalRule,
        Self::SkipCheckpointFlush,
        Self::NonAtomicPages,
        Self::VisibleBeforeDurable,
        Self::RedoPartialWrites,
        Self::MergeUnmarkedSibling,
        Self::IgnoreLogEpoch,
        Self::SalvageTornLog,
        Self::LogDamageAsTail,
        Self::FlashUnsyncedWriteback,
        Self::FlashTrustTornSlots,
        Self::DropOpsOfImagedRecords,
        Self::DoublewriteOldImages,
        Self::BulkSkipSync,
        Self::TrustPageChecksum,
        Self::TrustPageId,
        Self::RetryFailedLogSync,
        Self::IgnoreWriteError,
        Self::IgnoreReadError,
        Self::FlashWriteAfterFailure,
        Self::AckBeforeSync,
        Self::WriteLogPastReady,
        Self::IgnoreLogWriteError,
        Self::WriteOutAfterFailure,
        Self::SuperblockOneCopy,
        Self::DoublewriteStaleCopy,
    ];

    /// Whether the sabotage only has an effect with a flash cache.
    pub fn needs_flash_cache(self) -> bool {
        matches!(
            self,
            Self::FlashUnsyncedWriteback | Self::FlashTrustTornSlots | Self::FlashWriteAfterFailure
        )
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::SkipLogSync => "skip-log-sync",
            Self::SkipDoublewrite => "skip-doublewrite",
            Self::AckBeforeDurable => "ack-before-durable",
            Self::SkipWalRule => "skip-wal-rule",
            Self::SkipCheckpointFlush => "skip-checkpoint-flush",
            Self::NonAtomicPages => "non-atomic-pages",
            Self::VisibleBeforeDurable => "visible-before-durable",
            Self::RedoPartialWrites => "redo-partial-writes",
            Self::MergeUnmarkedSibling => "merge-unmarked-sibling",
            Self::IgnoreLogEpoch => "ignore-log-epoch",
            Self::SalvageTornLog => "salvage-torn-log",
            Self::LogDamageAsTail => "log-damage-as-tail",
            Self::FlashUnsyncedWriteback => "flash-unsynced-writeback",
            Self::FlashTrustTornSlots => "flash-trust-torn-slots",
            Self::DropOpsOfImagedRecords => "drop-ops-of-imaged-records",
            Self::DoublewriteOldImages => "doublewrite-old-images",
            Self::BulkSkipSync => "bulk-skip-sync",
            Self::TrustPageChecksum => "trust-page-checksum",
            Self::TrustPageId => "trust-page-id",
            Self::RetryFailedLogSync => "retry-failed-log-sync",
            Self::IgnoreWriteError => "ignore-write-error",
            Self::IgnoreReadError => "ignore-read-error",
            Self::FlashWriteAfterFailure => "flash-write-after-failure",
            Self::AckBeforeSync => "ack-before-sync",
            Self::WriteLogPastReady => "write-log-past-ready",
            Self::IgnoreLogWriteError => "ignore-log-write-error",
            Self::WriteOutAfterFailure => "write-out-after-failure",
            Self::SuperblockOneCopy => "superblock-one-copy",
            Self::DoublewriteStaleCopy => "doublewrite-stale-copy",
        }
    }
}

impl fmt::Display for Sabotage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Sabotage {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|x| x.name()).collect();
                Error::config(format!(
                    "no sabotage named '{s}': use one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// Whether `s` is the active sabotage.
#[cfg(feature = "fault-injection")]
pub(crate) fn is(active: Option<Sabotage>, s: Sabotage) -> bool {
    active == Some(s)
}

/// Never: a build without `fault-injection` has no way to set a sabotage.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn is(_active: Option<Sabotage>, _s: Sabotage) -> bool {
    false
}

/// Sabotages `trust-page-checksum` and `trust-page-id`: makes a page image read as `pid` pass
/// the check that would refuse it (a fresh checksum; its own page id under a valid checksum).
pub(crate) fn trust_damaged_page(active: Option<Sabotage>, buf: &mut [u8], pid: u64) {
    if buf.len() < 16 {
        return;
    }
    let crc = |b: &[u8]| crc32c::crc32c(&b[4..]).to_le_bytes();
    if is(active, Sabotage::TrustPageId) && buf[0..4] == crc(buf) {
        buf[8..16].copy_from_slice(&pid.to_le_bytes());
        let c = crc(buf);
        buf[0..4].copy_from_slice(&c);
    }
    if is(active, Sabotage::TrustPageChecksum) {
        let c = crc(buf);
        buf[0..4].copy_from_slice(&c);
    }
}

/// Sabotage `ignore-read-error`: the image of an empty leaf for page `pid` instead of the
/// read error `e`; without the sabotage, `e`.
pub(crate) fn unreadable_as_empty(
    active: Option<Sabotage>,
    e: Error,
    pid: u64,
    page_size: usize,
) -> Result<Vec<u8>> {
    if !(is(active, Sabotage::IgnoreReadError) && matches!(e, Error::Device(_))) {
        return Err(e);
    }
    let page = crate::format::Page {
        id: pid,
        lsn: 0,
        node: crate::format::Node::Leaf(Vec::new()),
    };
    let mut out = Vec::with_capacity(page_size);
    crate::format::encode_page(&page, page_size, &mut out);
    Ok(out)
}

/// Calls the observer, if any.
pub(crate) fn emit(obs: &Option<Observer>, e: Event) {
    if let Some(o) = obs {
        o(e);
    }
}

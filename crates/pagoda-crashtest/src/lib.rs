//! `pagoda crashtest`: concurrent multi-key transactions, DDL and checkpoints on emulated
//! devices, power cuts at random I/O operations (during commits, checkpoints, the cleaner and
//! recovery itself), recovery, and an exact check of the recovered state (see `oracle.rs`).
//!
//! Each cycle: open the database (recovery; in some cycles power is cut again during it, and
//! the next open must succeed), verify the previous cycle's transactions against the oracle,
//! delete the previous cycle's marker rows, run workers until the power is cut at a seeded
//! operation, and abandon the engine. In half the cycles, unflushed 4 KiB sectors may also tear
//! at 512-byte granularity. A final recovery verifies the last cycle.
//!
//! With [`CrashTestOptions::flash_cache`], a FaCE flash cache sits between the buffer pool
//! and the data device, on a third device that the same switch cuts; the harness then also
//! checks after each recovery that no flash slot holds a version older than the data device's
//! (a stale version would be served), and detected corruption fails the run in every torn mode
//! (the flash cache replaces the double-write buffer: a torn page must be repaired from flash).
//!
//! With [`CrashTestOptions::sabotage`], one safety step of the engine is removed; the test then
//! must fail (`tests/sabotage.rs` checks each). Every random choice of cycle `n` derives from
//! the seed and `n`; with one thread the engine's background thread is off and, with sync
//! commits, the run is deterministic, so `--seed S --replay-cycle N` reproduces a failure
//! exactly (with more threads the interleaving of the threads varies between runs, and so does
//! the timing of the flush thread that pipelined and lazy commits start even with one).
//!
//! This crate is a tool over the engine: it uses only `pagoda_engine`'s public API (the
//! [`pagoda_engine::fault::Observer`] probes and [`pagoda_engine::fault::Sabotage`] included,
//! with its `fault-injection` feature) and emulated devices from `pagoda_device`. It takes all
//! its settings in [`CrashTestOptions`] (no environment variables) and reports through the
//! returned [`CrashTestReport`] (it prints nothing); `pagoda crashtest` is its command-line
//! front end.

#![warn(missing_docs)]

mod bulk;
mod cycle;
mod faults;
mod ledger;
mod met;
mod open;
mod oracle;
mod power;
mod run;
mod verify_cycle;
mod workload;

/// Pages of the double-write area of the databases under test (the fault harness knows where
/// a damaged copy lies).
pub(crate) const DW_PAGES: u32 = 8;

pub use bulk::{run_bulk, LOAD_CUT};
pub use faults::{by_target, FaultCounts, FaultKind};
pub use oracle::{Finding, FindingKind};
// The engine's fault-injection items, for callers that do not depend on that feature.
pub use pagoda_engine::fault::{FlashStep, Sabotage};
pub use pagoda_engine::{FlashPages, FlashPolicy};
pub use power::CutPoint;
pub use run::run;
pub use workload::PIPELINE_DEPTH;

use pagoda_device::spec::DeviceKind;
use pagoda_device::spec::DeviceSpec;
use pagoda_engine::{CommitMode, Error, Result, TornMode};
use std::collections::BTreeMap;
use std::fmt;

/// Default size of the flash cache under test, in buffer pools: small, so that the ring wraps
/// and pages are written back from flash to the data device all the time.
pub const FLASH_CACHE_POOLS: u64 = 4;

/// The default flash cache holds at least this many cleaner batches (64 pages each; the
/// engine's ring needs 4 segments of one batch).
pub const FLASH_CACHE_MIN_BATCHES: u64 = 5;

/// The smallest log ring the engine takes.
pub const MIN_LOG_BYTES: u64 = 256 << 10;

/// A flash cache (FaCE) under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashFlashCache {
    /// The cache device. `None`: a RAM device (`mem`, without atomic writes, so that its slots
    /// can tear) when [`CrashTestOptions::device`] is `None`, else one more device of that
    /// kind. It must emulate power cuts.
    pub device: Option<DeviceSpec>,
    /// Bytes of the device the cache uses, its metadata included (`None`:
    /// [`FLASH_CACHE_POOLS`] times the buffer pool, and at least [`FLASH_CACHE_MIN_BATCHES`]
    /// cleaner batches of 64 pages plus 64 KiB for metadata).
    pub size_bytes: Option<u64>,
    /// Replacement policy.
    pub policy: FlashPolicy,
    /// Which pages are cached.
    pub pages: FlashPages,
}

impl CrashFlashCache {
    /// A flash cache with `policy` caching `pages`, on the default device and size.
    pub fn new(policy: FlashPolicy, pages: FlashPages) -> Self {
        Self {
            device: None,
            size_bytes: None,
            policy,
            pages,
        }
    }
}

impl Default for CrashFlashCache {
    fn default() -> Self {
        Self::new(FlashPolicy::Face, FlashPages::Dirty)
    }
}

/// Options of a crash test.
pub struct CrashTestOptions {
    /// Torn-write protection under test.
    pub torn: TornMode,
    /// Commit mode.
    pub commit: CommitMode,
    /// Power-cut cycles.
    pub cycles: u64,
    /// Seed of every random choice (workload, cut points, which sectors survive).
    pub seed: u64,
    /// Device to emulate (data and log each get one); `None` = RAM devices.
    pub device: Option<DeviceSpec>,
    /// Concurrent transaction threads (1 = deterministic with sync commits).
    pub threads: usize,
    /// Called after each cycle with the number of cycles done.
    pub progress: Option<Box<dyn Fn(u64) + Send + Sync>>,
    /// Page size (small pages give more pages, splits and torn writes per cycle).
    pub page_size: usize,
    /// Buffer pool size in bytes (`None`: 96 pages up to 8 KiB pages, else 48 pages).
    pub buffer_bytes: Option<usize>,
    /// The engine's commit spill room ([`pagoda_engine::DbOptions::commit_spill_bytes`]; `None`: the
    /// engine's default). `Some(0)` keeps every page in the pool, so evictions (and cleaner
    /// writes, also during redo) happen as often as the pool size makes them.
    pub commit_spill_bytes: Option<usize>,
    /// Keys per static table.
    pub keys: usize,
    /// Largest number of I/O operations before a cut (the cut point is uniform below it).
    pub max_ops_before_cut: u64,
    /// Chance that power is cut again during a recovery.
    pub recovery_cut_chance: f64,
    /// One safety step of the engine removed (the test must then fail).
    pub sabotage: Option<Sabotage>,
    /// Stop at the first cycle that fails.
    pub stop_on_failure: bool,
    /// Run up to this cycle and report it in full.
    pub replay_cycle: Option<u64>,
    /// Hunting aid: a cut during recovery falls inside the checkpoint that ends recovery.
    pub bias_open_checkpoint: bool,
    /// Hunting aid: chance that a workload checkpoint arms the cut within its first
    /// `bias_checkpoint_ops` operations (0: off).
    pub bias_checkpoint_cut: f64,
    /// See `bias_checkpoint_cut`.
    pub bias_checkpoint_ops: u64,
    /// A flash cache between the buffer pool and the data device (set it with
    /// [`CrashTestOptions::flash_cache`], which also makes the torn mode `none`).
    pub flash_cache: Option<CrashFlashCache>,
    /// Faults beyond power cuts, one of them armed in a share of the cycles (see
    /// [`FaultKind`]); with faults, workers also check every value they read.
    pub faults: Vec<FaultKind>,
    /// The share of cycles in which a fault is armed.
    pub fault_chance: f64,
    /// Every open takes the log device as sparse (`DbOptions::log_ready_bytes(0)`): the engine
    /// writes zeros ahead of its log writer while the workload runs (with background threads,
    /// i.e. more than one thread, a thread of its own does).
    pub sparse_log: bool,
    /// Bytes of the log ring (at least [`MIN_LOG_BYTES`]). A small ring wraps within a few
    /// cycles, so the log before an older checkpoint is reused often.
    pub log_bytes: u64,
}

impl Default for CrashTestOptions {
    fn default() -> Self {
        Self {
            torn: TornMode::Doublewrite,
            commit: CommitMode::Sync,
            cycles: 100,
            seed: 1,
            device: None,
            threads: 4,
            progress: None,
            page_size: 16384,
            buffer_bytes: None,
            commit_spill_bytes: None,
            keys: 300,
            max_ops_before_cut: 400,
            recovery_cut_chance: 0.3,
            sabotage: None,
            stop_on_failure: true,
            replay_cycle: None,
            bias_open_checkpoint: false,
            bias_checkpoint_cut: 0.0,
            bias_checkpoint_ops: 40,
            flash_cache: None,
            faults: Vec::new(),
            fault_chance: 0.5,
            sparse_log: false,
            log_bytes: 1 << 20,
        }
    }
}

impl fmt::Debug for CrashTestOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashTestOptions")
            .field("torn", &self.torn)
            .field("commit", &self.commit)
            .field("cycles", &self.cycles)
            .field("seed", &self.seed)
            .field("device", &self.device)
            .field("threads", &self.threads)
            .field("sabotage", &self.sabotage)
            .field("flash_cache", &self.flash_cache)
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

impl CrashTestOptions {
    /// Puts the flash cache `fc` under test and makes the torn mode `none` (the flash cache
    /// replaces the double-write buffer; set `torn` after this call to test `atomic`).
    pub fn flash_cache(mut self, fc: CrashFlashCache) -> Self {
        self.flash_cache = Some(fc);
        self.torn = TornMode::None;
        self
    }

    /// The buffer pool size in bytes (the default when `buffer_bytes` is `None`).
    pub fn pool_bytes(&self) -> usize {
        self.buffer_bytes
            .unwrap_or(if self.page_size <= 8192 { 96 } else { 48 } * self.page_size)
    }

    /// Bytes of its device the flash cache uses (0 without a flash cache).
    pub fn flash_cache_bytes(&self) -> u64 {
        self.flash_cache.as_ref().map_or(0, |fc| {
            fc.size_bytes.unwrap_or_else(|| {
                let batches = FLASH_CACHE_MIN_BATCHES * 64 * self.page_size as u64 + (64 << 10);
                (FLASH_CACHE_POOLS * self.pool_bytes() as u64).max(batches)
            })
        })
    }

    /// Whether detected corruption is excused (torn mode none without a flash cache: the
    /// engine detects a torn page but has nothing to repair it from).
    pub fn corruption_excused(&self) -> bool {
        self.torn == TornMode::None && self.flash_cache.is_none()
    }

    /// Refuses combinations that cannot work, with the fix.
    pub fn validate(&self) -> Result<()> {
        if self.cycles == 0 {
            return Err(Error::config(
                "crashtest needs at least one cycle (--cycles 1 or more)",
            ));
        }
        if self.threads == 0 || self.threads > 64 {
            return Err(Error::config("crashtest needs 1 to 64 threads (--threads)"));
        }
        if self.keys < 10 {
            return Err(Error::config("crashtest needs at least 10 keys per table"));
        }
        if self.max_ops_before_cut == 0 {
            return Err(Error::config(
                "the cut needs at least one operation to count",
            ));
        }
        if !(0.0..=1.0).contains(&self.recovery_cut_chance) {
            return Err(Error::config(
                "recovery_cut_chance is a probability from 0 to 1",
            ));
        }
        if self.log_bytes < MIN_LOG_BYTES {
            return Err(Error::config(
                "the engine's log ring is at least 256 KiB (--log-size 256KiB or more)",
            ));
        }
        if !(0.0..=1.0).contains(&self.fault_chance) {
            return Err(Error::config(
                "--fault-chance is a probability from 0 to 1 (e.g. 0.5)",
            ));
        }
        if let Some(s) = self.sabotage {
            self.check_sabotage(s)?;
        }
        if let Some(fc) = &self.flash_cache {
            if fc.size_bytes == Some(0) {
                return Err(Error::config(
                    "the flash cache needs a size above 0 (--flash-cache-size, e.g. 2MiB)",
                ));
            }
            if let Some(spec) = &fc.device {
                if matches!(spec.kind, DeviceKind::File(_)) {
                    return Err(Error::config(
                        "the flash cache device of a crash test must emulate a power cut; \
                         use mem or an emulated SSD (sata-ssd, nvme-ssd), not file:",
                    ));
                }
            }
        }
        if let Some(r) = self.replay_cycle {
            if r >= self.cycles {
                return Err(Error::config(format!(
                    "--replay-cycle {r} is beyond the run's {} cycles; give --cycles {} or more",
                    self.cycles,
                    r + 1
                )));
            }
        }
        Ok(())
    }

    /// A planted bug is checked only where the run can catch it: the torn mode, the flash
    /// cache, the fault or the commit mode its safety step guards.
    fn check_sabotage(&self, s: Sabotage) -> Result<()> {
        if let Some(ts) = s.needs_torn() {
            if !ts.contains(&self.torn) {
                let modes: Vec<String> = ts.iter().map(|t| format!("--torn {t}")).collect();
                return Err(Error::config(format!(
                    "sabotage {s} only has an effect with {} (this run uses --torn {})",
                    modes.join(" or "),
                    self.torn
                )));
            }
        }
        if s.needs_flash_cache() && self.flash_cache.is_none() {
            return Err(Error::config(format!(
                "sabotage {s} removes a safety step of the flash cache: give a flash cache \
                 (--flash-cache DEVICE, e.g. --flash-cache mem)"
            )));
        }
        if let Some(kinds) = faults::detecting(s) {
            if !kinds.iter().any(|k| self.faults.contains(k)) {
                let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                return Err(Error::config(format!(
                    "sabotage {s} removes the detection of a fault: give --faults {}",
                    names.join(" or --faults ")
                )));
            }
        }
        if s == Sabotage::SuperblockOneCopy && !self.faults.contains(&FaultKind::Bitrot) {
            return Err(Error::config(format!(
                "sabotage {s} is checked with --faults bitrot (only a damaged newest \
                 superblock copy makes recovery fall back to the older one)"
            )));
        }
        if s == Sabotage::SalvageTornLog && self.commit != CommitMode::Lazy {
            return Err(Error::config(format!(
                "sabotage {s} is checked with --commit lazy (only lazy commits are \
                 acknowledged while their log group can still tear)"
            )));
        }
        if s == Sabotage::VisibleBeforeDurable && self.commit != CommitMode::Pipelined {
            return Err(Error::config(format!(
                "sabotage {s} is checked with --commit pipelined (a sync commit is waited for before anyone can look)"
            )));
        }
        Ok(())
    }
}

/// A failed cycle: where the cut fell and what the oracle found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Failure {
    /// The run's seed.
    pub seed: u64,
    /// The cycle whose cut and recovery led to the finding.
    pub cycle: u64,
    /// Where the workload's cut fell.
    pub cut: Option<CutPoint>,
    /// The fault armed in the cycle, if any (`--faults`).
    pub fault: Option<String>,
    /// Cuts that fell during recovery before the successful open.
    pub recovery_cuts: Vec<CutPoint>,
    /// What was wrong (the first findings of the cycle).
    pub findings: Vec<Finding>,
    /// Findings of the cycle in all.
    pub total_findings: usize,
    /// Worker threads of the run (one thread with sync commits: the run is deterministic).
    pub threads: usize,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} cycle {}: {} finding(s)",
            self.seed, self.cycle, self.total_findings
        )?;
        if let Some(c) = &self.cut {
            writeln!(f, "  cut: {c}")?;
        }
        if let Some(x) = &self.fault {
            writeln!(f, "  fault: {x}")?;
        }
        for c in &self.recovery_cuts {
            writeln!(f, "  cut during recovery: {c}")?;
        }
        for x in &self.findings {
            writeln!(f, "  {x}")?;
        }
        write!(
            f,
            "  replay: pagoda crashtest --seed {} --replay-cycle {} (same flags)",
            self.seed, self.cycle
        )?;
        if self.threads > 1 {
            write!(
                f,
                "; with {} threads their interleaving differs between runs, so the replay may \
                 not meet the same failure (runs with --threads 1 --commit sync replay exactly)",
                self.threads
            )?;
        }
        Ok(())
    }
}

/// What a crash test found about its flash cache.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlashCrashReport {
    /// Replacement policy.
    pub policy: String,
    /// Which pages were cached.
    pub pages: String,
    /// Bytes of its device the cache used.
    pub size_bytes: u64,
    /// Flash slots older than the data device's copy of their page, summed over the checks after
    /// each recovery: a stale version would have been served. Must be 0.
    pub stale_versions_served: u64,
    /// Valid flash slots compared with the data device by those checks.
    pub slots_checked: u64,
    /// Opens of an existing database where the cache came up warm (its directory rebuilt).
    pub rebuilds: u64,
    /// Opens of an existing database where the cache started empty.
    pub cold_starts: u64,
    /// Valid pages found in flash by the rebuilds.
    pub rebuild_pages: u64,
    /// Ring segments read by the rebuilds after their directory checkpoint.
    pub rebuild_segments: u64,
    /// Cuts while a batch of pages was appended to the ring (or placed, policy lru).
    pub cuts_append: u64,
    /// Cuts while pages were written back from flash to the data device.
    pub cuts_write_back: u64,
    /// Cuts while the directory checkpoint was written.
    pub cuts_dir_checkpoint: u64,
    /// Cuts while the directory was rebuilt at open.
    pub cuts_rebuild: u64,
    /// Pages written back from flash to the data device (cycles that reached their cut).
    pub write_backs: u64,
    /// Pages written to the cache device.
    pub ring_page_writes: u64,
    /// Directory checkpoints written.
    pub dir_checkpoints: u64,
    /// Group Second Chance re-appends.
    pub gsc_reappends: u64,
    /// DRAM misses served from flash.
    pub hits: u64,
    /// Slots whose checksum failed when read.
    pub corrupt_slots: u64,
}

impl FlashCrashReport {
    /// Cuts that hit a flash cache step or the rebuild.
    pub fn cuts_in_flash_steps(&self) -> u64 {
        self.cuts_append + self.cuts_write_back + self.cuts_dir_checkpoint + self.cuts_rebuild
    }
}

/// What a crash test found.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CrashTestReport {
    /// Cycles run.
    pub cycles: u64,
    /// Acknowledged transactions (or DDL operations) missing, wholly or partly, after recovery.
    pub lost_commits: u64,
    /// Effects of transactions that never committed, visible after recovery (or a pending
    /// commit visible while running).
    pub uncommitted_visible: u64,
    /// Committed but unacknowledged transactions visible only in part.
    pub partial_transactions: u64,
    /// Lost updates (two committed writers of a key with the same snapshot) and read mismatches.
    pub isolation_violations: u64,
    /// Torn pages repaired by recovery.
    pub torn_pages_repaired: u64,
    /// Corrupt pages detected (by recovery or on read).
    pub corruption_detected: u64,
    /// Wrong values without a corruption report in torn mode none (a torn page used undetected).
    pub undetected_torn: u64,
    /// With `--commit lazy`: acknowledged commits lost by the cuts, each time a suffix of the
    /// commit order (what lazy commit allows; a commit lost in the middle is a lost commit).
    pub lazy_commits_lost: u64,
    /// The seed.
    pub seed: u64,
    /// Acknowledged commits over all cycles.
    pub commits_acknowledged: u64,
    /// Transactions and DDL operations whose outcome the oracle checked.
    pub transactions_checked: u64,
    /// Transactions and DDL operations the workloads ran (acknowledged, aborted or cut off;
    /// bulk runs: cycles): each is checked or unverified, unless the run stopped at a failure.
    pub transactions_run: u64,
    /// Transactions and DDL operations that could not be verified: recovery refused the
    /// database (detected damage, or a torn page in torn mode none), or a damaged page hid
    /// their outcome (see `verification` for the cycles).
    pub transactions_unverified: u64,
    /// How each cycle's workload was verified after its recovery: `verified`, or why not
    /// wholly (recovery refused the database, or damaged pages hid some outcomes), by count.
    pub verification: BTreeMap<String, u64>,
    /// Deepest B+tree seen after a recovery (levels).
    pub deepest_tree: u64,
    /// Cuts that fell while recovery was running.
    pub cuts_during_recovery: u64,
    /// Create and drop table operations issued.
    pub ddl_operations: u64,
    /// Cuts that hit while a checkpoint was running.
    pub cuts_mid_checkpoint: u64,
    /// Cuts that hit between a double-write and the sync of the in-place writes.
    pub cuts_mid_doublewrite: u64,
    /// Cuts by what the engine was doing.
    pub cut_phases: BTreeMap<String, u64>,
    /// Sectors torn at 512-byte granularity.
    pub torn_512_sectors: u64,
    /// Databases re-created after detected corruption (mode none).
    pub resets: u64,
    /// Opens that failed with the error of a fault still armed from the cycle before (the
    /// fault reached recovery; the open was retried with it disarmed).
    pub opens_failed_by_faults: u64,
    /// Opens refused at a torn page in torn mode none, retried with the torn sectors put
    /// back as before their write (so that the cycle is verified whole).
    pub untorn: u64,
    /// Cycles with two faults armed (one on each device).
    pub two_fault_cycles: u64,
    /// The sabotage in force, if any.
    pub sabotage: Option<String>,
    /// The flash cache's counters, when the run had one.
    pub flash: Option<FlashCrashReport>,
    /// Values read during the run that the crash test never wrote there (runs with faults,
    /// whose workers check what they read). Must be 0.
    pub wrong_values: u64,
    /// Injected failures that fired and that no caller heard of (runs with `--faults`). Must
    /// be 0.
    pub unreported: u64,
    /// What the injected faults did, by kind (runs with `--faults`).
    pub faults: BTreeMap<String, FaultCounts>,
    /// Failed cycles (the first ones, in full).
    pub failures: Vec<Failure>,
}

impl CrashTestReport {
    /// The line the CLI prints (scripts parse its `words N` fields).
    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "crashtest: cycles {}, lost commits {}, uncommitted visible {}, torn pages repaired {}, corruption detected {}, \
             transactions checked {}, deepest tree {}, cuts during recovery {}, ddl operations {}",
            self.cycles,
            self.lost_commits,
            self.uncommitted_visible,
            self.torn_pages_repaired,
            self.corruption_detected,
            self.transactions_checked,
            self.deepest_tree,
            self.cuts_during_recovery,
            self.ddl_operations
        );
        if self.lazy_commits_lost > 0 {
            line += &format!(", lazy commits lost as a suffix {}", self.lazy_commits_lost);
        }
        if !self.faults.is_empty() {
            let sum = |f: fn(&FaultCounts) -> u64| self.faults.values().map(f).sum::<u64>();
            line += &format!(
                ", faults injected {}, fired {}, detected {}, repaired {}, unreported {}, \
                 undetectable {}, wrong values {}",
                sum(|c| c.injected),
                sum(|c| c.fired),
                sum(|c| c.detected),
                sum(|c| c.repaired),
                sum(|c| c.unreported),
                sum(|c| c.undetectable),
                self.wrong_values
            );
        }
        if let Some(f) = &self.flash {
            line += &format!(
                ", stale versions served {}, flash rebuilds {}, pages found in flash {}, \
                 flash write-backs {}, cuts in flash steps {}",
                f.stale_versions_served,
                f.rebuilds,
                f.rebuild_pages,
                f.write_backs,
                f.cuts_in_flash_steps()
            );
        }
        line
    }

    /// Whether the run failed for mode `torn` (detected corruption is excused only in mode none
    /// without a flash cache).
    pub fn failed(&self, torn: TornMode) -> bool {
        let excused = torn == TornMode::None && self.flash.is_none();
        !self.failures.is_empty()
            || self.lost_commits > 0
            || self.uncommitted_visible > 0
            || self.partial_transactions > 0
            || self.isolation_violations > 0
            || self.undetected_torn > 0
            || self.wrong_values > 0
            || self.unreported > 0
            || self.faults.values().any(|c| c.unreported > 0)
            || (!excused && self.corruption_detected > 0)
            || self
                .flash
                .as_ref()
                .is_some_and(|f| f.stale_versions_served > 0)
    }
}

//! `bench tpcc --crash-restart DURATION` (the FaCE flash cache's restart claim, after the engine
//! example `flash_restart`): once the measured run has ended and its figures are taken, the
//! database is abandoned as a crash leaves it (no checkpoint; DRAM lost) and power is cut on every
//! device (an emulated SSD drops what its volatile write cache held and rebuilds its map). Then the
//! database is opened again with the same options, and the open is timed: log scan, redo from the
//! last checkpoint, and with a flash cache the rebuild of its directory. Then the workload runs
//! again for DURATION with no warm-up, so its throughput is that of the restarted database warming
//! up (DRAM cold; the flash cache as the crash left it).

use super::session::Bench;
use crate::error::{CliError, CliResult};
use pagoda_engine::{Db, DbOptions};
use pagoda_peers::PagodaStore;
use pagoda_workload::RunReport;
use serde_json::{json, Value};
use std::time::Instant;

/// Refuses, before any work, devices that cannot cut power (real files).
pub(super) fn check(bench: &Bench) -> CliResult<()> {
    if bench
        .run_options()
        .devices()
        .iter()
        .all(|d| d.as_power_cut().is_some())
    {
        return Ok(());
    }
    Err(CliError::Usage(
        "--crash-restart cuts power to the devices: give emulated devices for --data, --log \
         and --flash-cache (e.g. sata-ssd,latency=emulate), not files"
            .to_string(),
    ))
}

/// Crashes `store`, reopens it with `opts` and runs `after` on it; returns the reopened store
/// and the `restart` object of the JSON.
pub(super) fn crash_and_rerun(
    store: PagodaStore,
    opts: &DbOptions,
    seed: u64,
    after: impl FnOnce(&PagodaStore) -> CliResult<RunReport>,
) -> CliResult<(PagodaStore, Value)> {
    let describe = store.describe().to_string();
    store.abandon();
    for (i, d) in opts.devices().iter().enumerate() {
        let cut = d
            .as_power_cut()
            .ok_or_else(|| CliError::Usage("--crash-restart needs emulated devices".to_string()))?;
        cut.power_cut(seed.wrapping_add(i as u64))?;
    }
    let t0 = Instant::now();
    let db = Db::open(opts.clone())?;
    let open_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let st = db.stats();
    let store = PagodaStore::new(db, describe);
    let report = after(&store)?;
    let s = store.db().stats();
    let figures = json!({
        "state": "crash right after the measured run: no checkpoint, DRAM lost, power cut on every device",
        "open_ms": open_ms,
        "recovery_ms": st.recovery.duration_ms,
        "records_replayed": st.recovery.records_replayed,
        "log_groups": st.recovery.log_groups,
        "pages_read_from_data": st.recovery.pages_read,
        "torn_pages_repaired": st.recovery.torn_pages_repaired,
        "flash_rebuild_ms": st.flash_cache.as_ref().map(|f| f.rebuild_ms),
        "flash_warm_start": st.flash_cache.as_ref().map(|f| f.warm_start),
        "after": {
            "duration_s": report.duration_s,
            "throughput_ops_s": report.throughput_ops_s,
            "tpmC": report.tpmc,
            "buffer_hit_ratio": s.buffer.hit_ratio,
            "flash_cache_hit_ratio": s.flash_cache.as_ref().map(|f| f.hit_ratio),
        },
    });
    eprintln!(
        "restart: open {open_ms:.0} ms (recovery {:.0} ms, {} records replayed); then {:.0} tpmC over {:.1} s",
        st.recovery.duration_ms,
        st.recovery.records_replayed,
        report.tpmc.unwrap_or(0.0),
        report.duration_s
    );
    Ok((store, figures))
}

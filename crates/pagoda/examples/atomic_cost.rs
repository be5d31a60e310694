//! What one durable 16 KiB page costs on a real file under each torn-write mode, without the
//! engine around it: batches of 64 random pages (the cleaner's batch) written as
//!
//! * `none`: 64 O_DIRECT page writes in place, then fdatasync;
//! * `doublewrite`: the 64 pages as one 1 MiB write to a double-write area, fdatasync, the 64
//!   in place, fdatasync;
//! * `atomic`: 64 `RWF_ATOMIC` page writes in place, then fdatasync.
//!
//! The file is written in full first, so in-place writes overwrite allocated blocks, as in a
//! loaded database. Prints a table; with a third argument writes it as JSON too. XFS's counters
//! (`/sys/fs/xfs/stats/stats`, all XFS mounts) around each mode show the file system's own work.
//!
//!   cargo run --release -p pagoda --example atomic_cost -- DIR [BATCHES] [JSON]

use pagoda_device::file::{FileDevice, FileOptions};
use pagoda_device::{BlockDevice, WriteHints, SECTOR_SIZE};
use std::time::Instant;

const PAGE: usize = 16 * 1024;
const BATCH: usize = 64;
/// Pages of the file: 64 MiB, larger than one batch by far, so random pages rarely repeat.
const PAGES: u64 = 4096;

type Failure = Box<dyn std::error::Error>;

fn main() {
    if let Err(e) = run() {
        eprintln!("atomic_cost: error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(
        args.next()
            .ok_or("usage: atomic_cost DIR [BATCHES] [JSON]: DIR on the file system to measure")?,
    );
    let batches: usize = match args.next() {
        Some(b) => b
            .parse()
            .map_err(|_| format!("BATCHES '{b}' is not a number"))?,
        None => 40,
    };
    let json = args.next();
    let mut rows = Vec::new();
    println!("| torn mode | µs per durable page | fdatasyncs per batch | XFS transactions per page | XFS blocks allocated per page |");
    println!("|---|---|---|---|---|");
    for mode in ["atomic", "doublewrite", "none"] {
        let path = dir.join(format!("atomic-cost-{mode}"));
        let r = measure(&path, mode, batches);
        let _ = std::fs::remove_file(&path);
        let r = r?;
        println!(
            "| {mode} | {:.0} | {} | {:.2} | {:.2} |",
            r.us_per_page,
            if mode == "doublewrite" { 2 } else { 1 },
            r.xfs_transactions_per_page,
            r.xfs_blocks_per_page
        );
        rows.push(serde_json::json!({
            "mode": mode, "us_per_page": r.us_per_page, "pages": r.pages,
            "xfs_transactions_per_page": r.xfs_transactions_per_page,
            "xfs_blocks_allocated_per_page": r.xfs_blocks_per_page,
        }));
    }
    if let Some(p) = json {
        let doc = serde_json::json!({ "batch_pages": BATCH, "page_size": PAGE, "batches": batches, "modes": rows });
        std::fs::write(&p, serde_json::to_string_pretty(&doc)?)?;
    }
    Ok(())
}

struct Measured {
    us_per_page: f64,
    pages: usize,
    xfs_transactions_per_page: f64,
    xfs_blocks_per_page: f64,
}

fn measure(path: &std::path::Path, mode: &str, batches: usize) -> Result<Measured, Failure> {
    let dw_pages = BATCH as u64;
    let opts = FileOptions {
        direct: true,
        capacity_bytes: Some((PAGES + dw_pages) * PAGE as u64),
        atomic: (mode == "atomic").then_some(PAGE),
        ..FileOptions::default()
    };
    let dev = FileDevice::open(path, opts)?;
    let per = (PAGE / SECTOR_SIZE) as u64;
    // Fill everything (the pages and the double-write area) once, in 1 MiB writes.
    let chunk = vec![0x5au8; BATCH * PAGE];
    for start in (0..PAGES + dw_pages).step_by(BATCH) {
        dev.write(start * per, &chunk, WriteHints::NORMAL)?;
    }
    dev.flush()?;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let page = vec![0xa5u8; PAGE];
    let before = xfs_counters();
    let started = Instant::now();
    for _ in 0..batches {
        let mut ids: Vec<u64> = (0..BATCH).map(|_| dw_pages + next() % PAGES).collect();
        ids.sort_unstable();
        match mode {
            "doublewrite" => {
                dev.write(0, &chunk, WriteHints::NORMAL)?;
                dev.flush()?;
                for id in &ids {
                    dev.write(id * per, &page, WriteHints::NORMAL)?;
                }
            }
            "atomic" => {
                for id in &ids {
                    dev.write(id * per, &page, WriteHints::atomic(0))?;
                }
            }
            _ => {
                for id in &ids {
                    dev.write(id * per, &page, WriteHints::NORMAL)?;
                }
            }
        }
        dev.flush()?;
    }
    let elapsed = started.elapsed();
    let after = xfs_counters();
    let pages = batches * BATCH;
    let delta = |i: usize| after[i].saturating_sub(before[i]) as f64 / pages as f64;
    Ok(Measured {
        us_per_page: elapsed.as_secs_f64() * 1e6 / pages as f64,
        pages,
        xfs_transactions_per_page: delta(0),
        xfs_blocks_per_page: delta(1),
    })
}

/// `[transactions, blocks allocated]` from XFS's global counters (zeros without XFS).
fn xfs_counters() -> [u64; 2] {
    let text = std::fs::read_to_string("/sys/fs/xfs/stats/stats").unwrap_or_default();
    let mut out = [0u64; 2];
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let nums = |f: std::str::SplitWhitespace| -> Vec<u64> {
            f.filter_map(|x| x.parse().ok()).collect()
        };
        match f.next() {
            Some("trans") => out[0] = nums(f).iter().take(2).sum(),
            Some("extent_alloc") => out[1] = nums(f).get(1).copied().unwrap_or(0),
            _ => {}
        }
    }
    out
}

//! `pagoda mount`: a FUSE file system (`pagoda-fs`) whose data lives on an emulated device, so
//! a real program (MariaDB) runs on the emulated SSD's FTL. Counters on SIGUSR1, on reading
//! `MOUNT/.pagoda/stats`, and at unmount (Ctrl-C, SIGTERM, `umount`); a power cut by
//! `--power-cut-after N` or by writing `power-cut` to `MOUNT/.pagoda/control`.
//!
//! `--backing PATH` keeps the device's contents between runs as a logical image (one
//! capacity-sized sparse file, `pagoda_fs::backing`): loaded at start, then written through
//! and fdatasynced at every device flush, so what an fsync acknowledged survives even a
//! `kill -9` of the mount; after a power cut it holds what survived the cut, so the next mount
//! recovers from it. No save at exit is needed. (The SSD's own `backing=PATH` is addressed by
//! physical unit and truncated at open; the FTL's mapping lives in memory, so it cannot carry
//! data across processes.)

mod serve;

use crate::error::{CliError, CliResult};
use crate::report::write_json;
use pagoda_device::spec::DeviceSpec;
use pagoda_device::trace::TracingDevice;
use pagoda_device::{DeviceRef, DeviceStats, PowerCutReport};
use pagoda_fs::backing::ImageDevice;
use pagoda_fs::{Fs, FsOptions, FsStats, StreamRules};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// `pagoda mount` arguments.
#[derive(Debug, clap::Args)]
pub struct MountArgs {
    /// An empty directory to mount on.
    pub mountpoint: PathBuf,
    /// The device the files live on, e.g. `sata-ssd,capacity=2GiB,streams=2,precondition=1`.
    #[arg(long)]
    pub device: String,
    /// Keep the device's contents in this image file between runs: loaded if it exists,
    /// written through and synced at every fsync (what an fsync acknowledged survives a
    /// `kill -9` of the mount; after a power cut, the image holds what survived the cut).
    #[arg(long)]
    pub backing: Option<PathBuf>,
    /// Tag the writes to a file's byte range with a named stream, e.g.
    /// `dwb=ibdata1:1MiB-3MiB` (repeatable; ids from 1 in order; everything else stream 0).
    #[arg(long = "stream", value_name = "NAME=FILE:START-END")]
    pub streams: Vec<String>,
    /// Capture every device request in the device trace format (`pagoda ssd replay` reads it).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Cut the device's power right after N device write requests.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub power_cut_after: Option<u64>,
    /// Seed of the power cut's outcome (which unflushed sectors survive).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Threads serving reads, writes and fsyncs (0: every request on one thread, one at a
    /// time).
    #[arg(long, default_value_t = pagoda_fs::fuse::DEFAULT_THREADS)]
    pub threads: usize,
    /// Write the final report as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// The final (and SIGUSR1) report's JSON.
#[derive(Debug, serde::Serialize)]
struct MountReport {
    command: &'static str,
    device: String,
    streams: Vec<(u16, String)>,
    elapsed_s: f64,
    fs: FsJson,
    power_cut: Option<String>,
    power_cut_report: Option<PowerCutReport>,
    device_stats: DeviceStats,
}

#[derive(Debug, serde::Serialize)]
struct FsJson {
    commits: u64,
    meta_sectors: u64,
    data_sectors: u64,
    flushes: u64,
    atomic_writes: u64,
    atomic_fallbacks: u64,
    peak_io_in_flight: u64,
}

impl From<FsStats> for FsJson {
    fn from(s: FsStats) -> Self {
        Self {
            commits: s.commits,
            meta_sectors: s.meta_sectors,
            data_sectors: s.data_sectors,
            flushes: s.flushes,
            atomic_writes: s.atomic_writes,
            atomic_fallbacks: s.atomic_fallbacks,
            peak_io_in_flight: s.peak_io_in_flight,
        }
    }
}

/// Runs `pagoda mount` until unmounted or signalled.
pub fn run(a: &MountArgs) -> CliResult<()> {
    check_mountpoint(&a.mountpoint)?;
    let rules = StreamRules::parse(&a.streams).map_err(|e| CliError::Usage(e.to_string()))?;
    let spec = DeviceSpec::parse(&a.device)?;
    let raw = spec.open()?;
    let caps = raw.caps();
    if rules.streams_needed() > caps.streams {
        return Err(CliError::Usage(format!(
            "the --stream rules need {} streams but the device has {}; add streams={} to --device",
            rules.streams_needed(),
            caps.streams,
            rules.streams_needed()
        )));
    }
    let (image, tracer, dev) = stack(a, &raw)?;
    let opts = FsOptions {
        rules: rules.clone(),
    };
    let (mut fs, formatted) = Fs::open_or_format(dev.clone(), opts)
        .map_err(|e| CliError::Other(format!("{}: {e}", a.device)))?;
    if let Some(n) = a.power_cut_after {
        fs.power_cut_after(n, a.seed);
    }
    let free = fs.statfs();
    eprintln!(
        "pagoda mount: {} on {} ({} file system, {} of {} MiB free; streams: {})",
        a.mountpoint.display(),
        dev.describe(),
        if formatted { "new" } else { "recovered" },
        free.free * 4 / 1024,
        free.blocks * 4 / 1024,
        stream_names(&rules)
    );
    serve::check_fuse()?;
    let fs = Arc::new(Mutex::new(fs));
    let start = Instant::now();
    let device = dev.describe();
    let render: pagoda_fs::fuse::StatsFn = {
        let names = rules.names();
        let device = device.clone();
        Arc::new(move |fs: &Fs, json: bool| {
            let r = report(fs, &device, &names, start);
            if json {
                serde_json::to_string_pretty(&r).unwrap_or_default()
            } else {
                render_text(&r)
            }
        })
    };
    serve::serve(&a.mountpoint, fs.clone(), render, a.seed, a.threads)?;

    finish(
        a,
        &fs,
        &device,
        &rules,
        start,
        (image.as_ref(), tracer.as_ref()),
    )
}

/// The device stack under the file system: the emulated device, its backing image file
/// (loaded when it exists) and the tracer above (a trace shows the file system's requests
/// only). Returns the image, the tracer and the top of the stack.
#[allow(clippy::type_complexity)] // the three layers, each kept for the end of the run
fn stack(
    a: &MountArgs,
    raw: &DeviceRef,
) -> CliResult<(
    Option<Arc<ImageDevice>>,
    Option<Arc<TracingDevice>>,
    DeviceRef,
)> {
    let image = match &a.backing {
        Some(path) => {
            let (img, loaded) = ImageDevice::open(path, raw.clone())?;
            if loaded {
                eprintln!("pagoda mount: loaded {}", path.display());
            }
            Some(Arc::new(img))
        }
        None => None,
    };
    // Loading and preconditioning are not the workload.
    raw.flush()?;
    raw.reset_stats();
    let base: DeviceRef = match &image {
        Some(i) => i.clone(),
        None => raw.clone(),
    };
    let tracer = match &a.trace {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| CliError::Io {
                path: p.clone(),
                source: e,
            })?;
            Some(Arc::new(TracingDevice::new(
                base.clone(),
                std::io::BufWriter::with_capacity(1 << 20, f),
            )))
        }
        None => None,
    };
    let dev: DeviceRef = match &tracer {
        Some(t) => t.clone(),
        None => base,
    };
    Ok((image, tracer, dev))
}

/// After the unmount: the final sync, the trace flushed, the report printed (and written as
/// JSON), the image in step with the device.
fn finish(
    a: &MountArgs,
    fs: &Mutex<Fs>,
    device: &str,
    rules: &StreamRules,
    start: Instant,
    (image, tracer): (Option<&Arc<ImageDevice>>, Option<&Arc<TracingDevice>>),
) -> CliResult<()> {
    let mut fs = fs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if fs.down_reason().is_none() {
        fs.sync()
            .map_err(|e| CliError::Other(format!("final sync failed: {e}")))?;
    }
    if let (Some(t), Some(td)) = (&a.trace, tracer) {
        td.flush_trace()?;
        eprintln!("pagoda mount: trace in {}", t.display());
    }
    let rep = report(&fs, device, &rules.names(), start);
    println!("{}", render_text(&rep));
    if let Some(p) = &a.json {
        write_json(p, &rep)?;
    }
    // Every flush (the final sync's too, and a power cut) left the image in step already;
    // this reports an image error that took the file system down.
    if let Some(img) = image {
        img.sync_image()?;
        eprintln!("pagoda mount: the device is in {}", img.path().display());
    }
    Ok(())
}

fn check_mountpoint(p: &Path) -> CliResult<()> {
    let meta = std::fs::metadata(p).map_err(|e| {
        CliError::Usage(format!(
            "mount point {}: {e}; create an empty directory first (mkdir -p)",
            p.display()
        ))
    })?;
    if !meta.is_dir() {
        return Err(CliError::Usage(format!(
            "mount point {} is not a directory; give an empty directory",
            p.display()
        )));
    }
    let mut entries = std::fs::read_dir(p).map_err(|e| CliError::Io {
        path: p.to_path_buf(),
        source: e,
    })?;
    if entries.next().is_some() {
        return Err(CliError::Usage(format!(
            "mount point {} is not empty (or is mounted already); give an empty directory",
            p.display()
        )));
    }
    Ok(())
}

fn stream_names(rules: &StreamRules) -> String {
    rules
        .names()
        .iter()
        .map(|(i, n)| format!("{i}={n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn report(fs: &Fs, device: &str, names: &[(u16, String)], start: Instant) -> MountReport {
    MountReport {
        command: "mount",
        device: device.to_string(),
        streams: names.to_vec(),
        elapsed_s: start.elapsed().as_secs_f64(),
        fs: fs.stats().into(),
        power_cut: fs.down_reason().map(str::to_string),
        power_cut_report: fs.last_power_cut().cloned(),
        device_stats: fs.device().stats(),
    }
}

fn render_text(r: &MountReport) -> String {
    let mut out = format!(
        "pagoda mount: {} after {:.1} s\nfile system: {} commits ({} metadata sectors), {} data \
         sectors written, {} flushes; at most {} data requests in the device at once\n",
        r.device,
        r.elapsed_s,
        r.fs.commits,
        r.fs.meta_sectors,
        r.fs.data_sectors,
        r.fs.flushes,
        r.fs.peak_io_in_flight
    );
    if r.fs.atomic_writes + r.fs.atomic_fallbacks > 0 {
        out.push_str(&format!(
            "direct I/O: {} atomic-unit writes, {} units written non-atomically (not one \
             aligned run on the device)\n",
            r.fs.atomic_writes, r.fs.atomic_fallbacks
        ));
    }
    if let Some(why) = &r.power_cut {
        out.push_str(&format!("power cut: {why}\n"));
    }
    out.push_str(&super::ssd::stats_tables(&r.device_stats));
    let names: Vec<String> = r.streams.iter().map(|(i, n)| format!("{i}={n}")).collect();
    out.push_str(&format!("streams: {}\n", names.join(", ")));
    out
}

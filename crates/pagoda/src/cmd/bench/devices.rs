//! The devices of one benchmark run: the data, log and flash-cache device strings parsed
//! and checked against the phases asked for, and turned into the engine's options (a
//! partition of the data device for the log, a pre-sized log file, atomic page writes on a
//! file).

use super::flash::{self, FlashPlan};
use super::{log_partition, EngineArgs, PhaseArgs};
use crate::error::{CliError, CliResult};
use pagoda_device::spec::{DeviceKind, DeviceSpec};
use pagoda_engine::{DbOptions, TornMode};
use std::path::{Path, PathBuf};

/// The devices the flags name, checked.
pub(super) struct DevicePlan {
    data: Option<DeviceSpec>,
    log: Option<DeviceSpec>,
    /// `--log data-partition,size=SIZE`: the log's bytes at the end of the data device.
    log_part: Option<u64>,
    pub(super) flash: Option<FlashPlan>,
}

fn emulated(s: &Option<DeviceSpec>) -> bool {
    s.as_ref()
        .is_some_and(|s| !matches!(s.kind, DeviceKind::File(_)))
}

impl DevicePlan {
    /// Parses the device flags and refuses what the phases cannot use (a persistent
    /// database without a place for it, a run on emulated devices, a run with nothing
    /// loaded, a flash cache on the data or log device's own file).
    pub(super) fn of(e: &EngineArgs, p: &PhaseArgs) -> CliResult<Self> {
        let data = e.data.as_deref().map(DeviceSpec::parse).transpose()?;
        let log_part = log_partition::parse(e.log.as_deref())?;
        log_partition::check(log_part, data.as_ref())?;
        let log = match log_part {
            Some(_) => None,
            None => e.log.as_deref().map(DeviceSpec::parse).transpose()?,
        };
        let flash = flash::plan(&e.flash)?;
        // Without --dir, a file goes to a temporary directory removed at exit: the data file
        // when --data is not given, the log file when --data is a file and --log is not.
        let file_data = data
            .as_ref()
            .is_some_and(|s| matches!(s.kind, DeviceKind::File(_)));
        if (p.load_only || p.run_only)
            && e.dir.is_none()
            && (data.is_none() || (file_data && log.is_none()))
        {
            return Err(CliError::Usage(
                "--load-only and --run-only need a persistent database: give --dir PATH \
                 (or file: devices for both --data and --log)"
                    .to_string(),
            ));
        }
        if p.run_only && (emulated(&data) || emulated(&log)) {
            return Err(CliError::Usage(
                "--run-only cannot use an emulated device: it starts empty each run; use --dir or file: devices"
                    .to_string(),
            ));
        }
        let plan = Self {
            data,
            log,
            log_part,
            flash,
        };
        if p.run_only {
            plan.check_loaded_exists(e)?;
        }
        if let Some(f) = &plan.flash {
            // The files data and log will use, as opened below (a temporary directory is new
            // and cannot hold the cache's file).
            let in_dir = |name: &str| e.dir.iter().map(|d| d.join(name)).collect::<Vec<_>>();
            let data_files = plan
                .data
                .as_ref()
                .map_or_else(|| in_dir("data.pagoda"), flash::device_files);
            let log_files = match (&plan.log, &plan.data) {
                (Some(l), _) => flash::device_files(l),
                (None, Some(d)) if emulated(&plan.data) || plan.log_part.is_some() => {
                    flash::device_files(d)
                }
                _ => in_dir("log.pagoda"),
            };
            f.check_own_device(&data_files, &log_files)?;
            if let Some(note) = f.phase_note(p) {
                eprintln!("{note}");
            }
        }
        Ok(plan)
    }

    /// Refuses a --run-only run before anything is created when no database was loaded.
    fn check_loaded_exists(&self, e: &EngineArgs) -> CliResult<()> {
        let data_path = match &self.data {
            Some(DeviceSpec {
                kind: DeviceKind::File(path),
                ..
            }) => path.clone(),
            _ => e
                .dir
                .as_ref()
                .map_or_else(PathBuf::default, |d| d.join("data.pagoda")),
        };
        if data_path.exists() {
            return Ok(());
        }
        Err(CliError::Usage(format!(
            "--run-only: no loaded benchmark database at {} (nothing was created); \
             load one first with --load-only and the same --dir",
            data_path.display()
        )))
    }

    /// The engine's options with the devices opened (files in `dir` where none is named).
    pub(super) fn options(&self, e: &EngineArgs, dir: &Path) -> CliResult<DbOptions> {
        let buffer = e.buffer.bytes();
        let log_size = e.log_size.as_ref().map(crate::units::Size::bytes);
        let page_size = e.page_size.bytes();
        // `--torn atomic` on a file: the data file asks for atomic writes of one page (the
        // engine's own files under --dir do the same in the engine).
        let data = self
            .data
            .clone()
            .map(|d| atomic_pages(d, e.torn, page_size));
        Ok(match (&data, &self.log) {
            (None, None) => DbOptions::in_dir(dir),
            (Some(d), _) if self.log_part.is_some() => {
                let (data_dev, log_dev) =
                    log_partition::open(d, self.log_part.unwrap_or_default())?;
                DbOptions::with_devices(data_dev, log_dev)
            }
            (Some(d), l) => {
                let log = match l {
                    Some(l) => l.clone(),
                    None if !matches!(d.kind, DeviceKind::File(_)) => d.clone(),
                    None => {
                        DeviceSpec::parse(&format!("file:{}", dir.join("log.pagoda").display()))?
                    }
                };
                DbOptions::with_devices(d.open()?, open_log(&log, buffer, log_size)?)
            }
            (None, Some(l)) => DbOptions::with_devices(
                atomic_pages(
                    DeviceSpec::parse(&format!("file:{}", dir.join("data.pagoda").display()))?,
                    e.torn,
                    page_size,
                )
                .open()?,
                open_log(l, buffer, log_size)?,
            ),
        })
    }

    /// The data and log devices as the report names them.
    pub(super) fn names(&self, e: &EngineArgs, dir: &Path) -> (String, String) {
        (
            e.data
                .clone()
                .unwrap_or_else(|| format!("file:{}/data.pagoda", dir.display())),
            e.log.clone().unwrap_or_else(|| {
                if emulated(&self.data) {
                    e.data.clone().unwrap_or_default()
                } else {
                    format!("file:{}/log.pagoda", dir.display())
                }
            }),
        )
    }
}

/// Opens the log device. A new `file:` log without a capacity is written out with zeros first,
/// sized as the engine sizes its own (`DbOptions::new_log_file_bytes`: `--log-size`, else
/// `buffer` up to 1 GiB): appending
/// to a sparse file allocates blocks, and every fdatasync then commits file-system metadata
/// too (on this machine's ext4 that halved single-thread durable commits). An existing file
/// keeps its size. Without a `direct` key the log is opened with O_DIRECT where the file
/// system allows it.
fn open_log(
    spec: &DeviceSpec,
    buffer: u64,
    log_size: Option<u64>,
) -> CliResult<pagoda_device::DeviceRef> {
    let DeviceKind::File(path) = &spec.kind else {
        return Ok(spec.open()?);
    };
    if spec.options.iter().any(|(k, _)| k == "capacity") || is_block_device(path) {
        return Ok(spec.open()?);
    }
    let bytes = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(_) => {
            let mut o =
                DbOptions::default().buffer_bytes(usize::try_from(buffer).unwrap_or(usize::MAX));
            if let Some(size) = log_size {
                o = o.log_capacity(size);
            }
            let bytes = o.new_log_file_bytes() + 4096;
            pagoda_engine::files::preallocate_log_file(path, bytes)?;
            bytes
        }
    };
    let spec = spec.clone().with("capacity", bytes / 4096 * 4096);
    if spec.options.iter().any(|(k, _)| k == "direct") {
        return Ok(spec.open()?);
    }
    // As `DbOptions::in_dir` does: O_DIRECT where the file system allows it (not tmpfs).
    Ok(spec
        .clone()
        .with("direct", 1)
        .open()
        .or_else(|_| spec.open())?)
}

fn is_block_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// With `--torn atomic`, a `file:` data device that names no atomic unit gets `atomic=PAGE`:
/// the file device then writes each page with RWF_ATOMIC (O_DIRECT), or its open says what
/// statx reported and where to get a file system that offers atomic writes.
fn atomic_pages(spec: DeviceSpec, torn: TornMode, page_size: u64) -> DeviceSpec {
    let names_unit = spec.options.iter().any(|(k, _)| k == "atomic");
    if torn == TornMode::Atomic && matches!(spec.kind, DeviceKind::File(_)) && !names_unit {
        spec.with("atomic", page_size)
    } else {
        spec
    }
}

//! The flash cache flags of `pagoda bench` (FaCE): `--flash-cache DEVICE`,
//! `--flash-cache-size`, `--flash-cache-policy`, `--flash-cache-pages`; what they mean once
//! checked, and how they reach the engine.
//!
//! Semantics:
//! - The device string is any device `--data` takes. When it names no `capacity`, the device
//!   gets `--flash-cache-size` as its capacity; a device with neither is refused (an existing
//!   block device named by `file:` is used whole).
//! - `--flash-cache-size` is how much of the device the cache uses, metadata included; without
//!   it the cache uses the whole device.
//! - The size, policy and pages flags without `--flash-cache` are refused.
//! - The cache device may share no file with the data or log device (`file:` paths and
//!   `backing=` files are compared).
//! - Only `file:` keeps the cache between processes: emulated devices and `mem` start empty
//!   in every process (an SSD's `backing=PATH` file is rewritten when it opens), so with
//!   `--run-only` such a cache starts cold, which is said in a note, not refused.

use super::PhaseArgs;
use crate::error::{CliError, CliResult};
use pagoda::cli::flash::FlashCacheFlags;
use pagoda_device::spec::{DeviceKind, DeviceSpec};
use pagoda_device::units::format_size;
use pagoda_engine::{FlashCacheOptions, FlashPages, FlashPolicy};
use serde_json::{json, Value};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Checked flash cache flags: what to open and how to describe it.
#[derive(Debug)]
pub(super) struct FlashPlan {
    /// The device string as given.
    given: String,
    /// The device to open (with the capacity filled in when the string named none).
    spec: DeviceSpec,
    /// Bytes of the device the cache uses (`None`: all of it).
    size_bytes: Option<u64>,
    policy: FlashPolicy,
    pages: FlashPages,
}

/// Checks the flags; `None` when no flash cache is configured (clap refused the other flags
/// without `--flash-cache`).
pub(super) fn plan(flags: &FlashCacheFlags) -> CliResult<Option<FlashPlan>> {
    let Some(given) = &flags.device else {
        return Ok(None);
    };
    let mut spec = DeviceSpec::parse(given)?;
    let size_bytes = flags.size_bytes()?;
    let names_capacity = spec.options.iter().any(|(k, _)| k == "capacity");
    if !names_capacity {
        match size_bytes {
            Some(_) => {
                let text = flags
                    .size
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                spec = spec.with("capacity", &text);
            }
            None if is_block_device(&spec) => {}
            None => {
                return Err(CliError::Usage(format!(
                    "--flash-cache {given} names no capacity: give --flash-cache-size SIZE \
                         (e.g. 512MiB) or capacity=SIZE in the device string"
                )))
            }
        }
    }
    Ok(Some(FlashPlan {
        given: given.clone(),
        spec,
        size_bytes,
        policy: flags.policy(),
        pages: flags.pages(),
    }))
}

impl FlashPlan {
    /// Refuses a cache device that shares a file with the data or log device.
    pub(super) fn check_own_device(&self, data: &[PathBuf], log: &[PathBuf]) -> CliResult<()> {
        for mine in device_files(&self.spec) {
            let mine = resolve(&mine);
            for (role, files) in [("data", data), ("log", log)] {
                if files.iter().any(|f| resolve(f) == mine) {
                    return Err(CliError::Usage(format!(
                        "--flash-cache {} uses {}, which is also the {role} device's file: \
                         give the cache a device of its own (e.g. file:DIR/cache.pagoda or sata-ssd)",
                        self.given,
                        mine.display()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether the cache device keeps its contents when the process ends.
    pub(super) fn keeps_data(&self) -> bool {
        matches!(self.spec.kind, DeviceKind::File(_))
    }

    /// A note for phases that span processes, when the cache cannot follow.
    pub(super) fn phase_note(&self, p: &PhaseArgs) -> Option<String> {
        if self.keeps_data() || !(p.load_only || p.run_only) {
            return None;
        }
        let why = match &self.spec.kind {
            DeviceKind::Mem => "mem keeps nothing between processes".to_string(),
            _ => match self.backing() {
                Some(path) => format!(
                    "an emulated device starts empty in every process (its backing file {} is \
                     rewritten when it opens)",
                    path.display()
                ),
                None => "an emulated device starts empty in every process".to_string(),
            },
        };
        Some(if p.run_only {
            format!(
                "note: the flash cache on {} starts cold: {why}; for a warm restart give \
                 --flash-cache file:PATH at --load-only and --run-only",
                self.given
            )
        } else {
            format!(
                "note: the flash cache on {} ends with this process ({why}); a later --run-only \
                 starts it cold unless it is on file:PATH",
                self.given
            )
        })
    }

    /// Opens the cache device and builds the engine's options.
    pub(super) fn open(&self) -> CliResult<FlashCacheOptions> {
        let mut o = FlashCacheOptions::new(self.spec.open()?)
            .policy(self.policy)
            .pages(self.pages);
        if let Some(n) = self.size_bytes {
            o = o.size_bytes(n);
        }
        Ok(o)
    }

    /// The device string in force (the capacity filled in).
    pub(super) fn device_text(&self) -> String {
        let mut s = match &self.spec.kind {
            DeviceKind::File(p) => format!("file:{}", p.display()),
            DeviceKind::Mem => "mem".to_string(),
            DeviceKind::Preset(name) => name.clone(),
        };
        for (k, v) in &self.spec.options {
            s.push_str(&format!(",{k}={v}"));
        }
        s
    }

    /// For the engine line: `flash=DEVICE (SIZE, POLICY, PAGES)`.
    pub(super) fn describe(&self) -> String {
        format!(
            "flash={} ({}, {}, {} pages)",
            self.device_text(),
            self.size_bytes
                .map_or_else(|| "whole device".to_string(), format_size),
            self.policy,
            self.pages
        )
    }

    /// The `config` keys of the JSON.
    pub(super) fn config_json(&self) -> Value {
        json!({
            "flash_cache": self.device_text(),
            "flash_cache_size_bytes": self.size_bytes,
            "flash_cache_policy": self.policy.to_string(),
            "flash_cache_pages": self.pages.to_string(),
            "flash_cache_keeps_data": self.keeps_data(),
        })
    }

    fn backing(&self) -> Option<PathBuf> {
        backing_file(&self.spec)
    }
}

/// The `config` keys of the JSON when no flash cache is configured.
pub(super) fn no_cache_config_json() -> Value {
    json!({
        "flash_cache": null, "flash_cache_size_bytes": null, "flash_cache_policy": null,
        "flash_cache_pages": null, "flash_cache_keeps_data": null,
    })
}

/// Files a device keeps its data in: a `file:` path, or an emulated device's `backing=` file.
pub(super) fn device_files(spec: &DeviceSpec) -> Vec<PathBuf> {
    match &spec.kind {
        DeviceKind::File(p) => vec![p.clone()],
        _ => backing_file(spec).into_iter().collect(),
    }
}

fn backing_file(spec: &DeviceSpec) -> Option<PathBuf> {
    // Later options override earlier ones, as the device applies them.
    match spec.options.iter().rev().find(|(k, _)| k == "backing") {
        Some((_, v)) if v != "ram" && v != "none" => Some(PathBuf::from(v)),
        _ => None,
    }
}

fn is_block_device(spec: &DeviceSpec) -> bool {
    match &spec.kind {
        DeviceKind::File(p) => std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device()),
        _ => false,
    }
}

/// One spelling per file: canonical when it (or its directory) exists, else absolute.
fn resolve(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    if let (Some(parent), Some(name)) = (p.parent(), p.file_name()) {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        if let Ok(c) = parent.canonicalize() {
            return c.join(name);
        }
    }
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dev: Option<&str>, size: Option<&str>) -> FlashCacheFlags {
        FlashCacheFlags {
            device: dev.map(str::to_string),
            size: size.map(|s| s.parse().expect("a size")),
            policy: None,
            pages: None,
        }
    }

    #[test]
    fn size_becomes_the_capacity_only_when_the_string_names_none() {
        let p = plan(&args(Some("mem"), Some("8MiB"))).unwrap().unwrap();
        assert_eq!(p.device_text(), "mem,capacity=8MiB");
        assert_eq!(p.size_bytes, Some(8 << 20));
        let p = plan(&args(Some("sata-ssd,capacity=1GiB"), Some("64MiB")))
            .unwrap()
            .unwrap();
        assert_eq!(p.device_text(), "sata-ssd,capacity=1GiB");
        let p = plan(&args(Some("mem,capacity=16MiB"), None))
            .unwrap()
            .unwrap();
        assert_eq!(p.size_bytes, None);
        assert_eq!(p.policy, FlashPolicy::Face);
        assert_eq!(p.pages, FlashPages::Dirty);
    }

    #[test]
    fn refuses_what_cannot_work() {
        let e = plan(&args(Some("mem"), None)).unwrap_err().to_string();
        assert!(e.contains("--flash-cache-size"), "{e}");
        assert!(plan(&args(Some("mem"), Some("0"))).is_err());
        assert!(plan(&args(Some("floppy"), Some("8MiB"))).is_err());
        assert!(plan(&args(None, None)).unwrap().is_none());
    }

    #[test]
    fn shared_files_are_found_by_any_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data.pagoda");
        let twisted = dir.path().join(".").join("data.pagoda");
        let p = plan(&args(
            Some(&format!("file:{}", twisted.display())),
            Some("8MiB"),
        ))
        .unwrap()
        .unwrap();
        let e = p
            .check_own_device(std::slice::from_ref(&data), &[])
            .unwrap_err();
        assert!(e.to_string().contains("data device"), "{e}");
        let backing = dir.path().join("b");
        let p = plan(&args(
            Some(&format!("sata-ssd,backing={}", backing.display())),
            Some("8MiB"),
        ))
        .unwrap()
        .unwrap();
        assert!(p.check_own_device(&[], &[backing]).is_err());
        assert!(p.check_own_device(&[data], &[]).is_ok());
        assert!(!p.keeps_data());
    }
}

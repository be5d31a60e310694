//! Device strings of the command line (`docs/cli.md`): `file:PATH`, `mem[,key=value...]`,
//! `PRESET[,key=value,...]` with PRESET one of `sata-ssd`, `nvme-ssd`, `hdd-15k`,
//! `raid0-8x-hdd-15k`. Any of them takes `pagecache=SIZE` (buffered I/O through a host page
//! cache in front of the device).

use crate::error::{DeviceError, Result};
use crate::file::{FileDevice, FileOptions};
use crate::hdd::{Hdd, HddConfig};
use crate::mem::{MemConfig, MemDevice};
use crate::pagecache::{self, PageCache, PageCacheOptions};
use crate::raid::raid0_preset;
use crate::ssd::{Ssd, SsdConfig};
use crate::DeviceRef;
use std::path::PathBuf;
use std::sync::Arc;

/// The emulated presets a user can name.
pub const PRESETS: [&str; 4] = ["sata-ssd", "nvme-ssd", "hdd-15k", "raid0-8x-hdd-15k"];

/// Keys a `file:` device takes (the page cache's among them: it wraps any device).
const FILE_KEYS: [&str; 7] = [
    "direct",
    "capacity",
    "streams",
    "atomic",
    pagecache::KEYS[0],
    pagecache::KEYS[1],
    pagecache::KEYS[2],
];

/// What kind of device a spec names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// A real file or block device.
    File(PathBuf),
    /// RAM only.
    Mem,
    /// An emulated preset.
    Preset(String),
}

/// A parsed device string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The device kind.
    pub kind: DeviceKind,
    /// `key=value` options in the order given.
    pub options: Vec<(String, String)>,
}

impl DeviceSpec {
    /// Parses a device string.
    pub fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("file:") {
            // `file:PATH[,key=value...]`: trailing parts that are known file keys are options;
            // anything else belongs to the path (paths may contain commas).
            let mut parts: Vec<&str> = rest.split(',').collect();
            let mut options = Vec::new();
            while parts.len() > 1 {
                let last = parts[parts.len() - 1];
                match last.split_once('=') {
                    Some((k, v)) if FILE_KEYS.contains(&k.trim()) => {
                        options.insert(0, (k.trim().to_string(), v.trim().to_string()));
                        parts.pop();
                    }
                    _ => break,
                }
            }
            let path = parts.join(",");
            if path.is_empty() {
                return Err(DeviceError::config(
                    "file: needs a path, e.g. file:/tmp/pagoda.data",
                ));
            }
            return Ok(Self {
                kind: DeviceKind::File(PathBuf::from(path)),
                options,
            });
        }
        let mut parts = text.split(',');
        let name = parts.next().unwrap_or_default().trim();
        let kind = if name == "mem" {
            DeviceKind::Mem
        } else if PRESETS.contains(&name)
            || (name.starts_with("raid0-") && name.ends_with("x-hdd-15k"))
        {
            DeviceKind::Preset(name.to_string())
        } else {
            return Err(DeviceError::config(format!(
                "unknown device '{name}': use file:PATH, mem, or a preset ({})",
                PRESETS.join(", ")
            )));
        };
        let mut options = Vec::new();
        for part in parts {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let Some((k, v)) = part.split_once('=') else {
                return Err(DeviceError::config(format!(
                    "device option '{part}' is not key=value (e.g. capacity=1GiB)"
                )));
            };
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() || v.is_empty() {
                return Err(DeviceError::config(format!(
                    "device option '{part}' has an empty key or value"
                )));
            }
            options.push((k.to_string(), v.to_string()));
        }
        Ok(Self { kind, options })
    }

    /// Adds an option (later options override earlier ones).
    pub fn with(mut self, key: &str, value: impl ToString) -> Self {
        self.options.push((key.to_string(), value.to_string()));
        self
    }

    /// Opens the device this spec names; with `pagecache=SIZE` (and optionally
    /// `pagecache_request=SIZE`, `pagecache_depth=N`) behind a host page cache of that size,
    /// as buffered I/O is.
    pub fn open(&self) -> Result<DeviceRef> {
        let (cache, own): (Vec<_>, Vec<_>) = self
            .options
            .iter()
            .cloned()
            .partition(|(k, _)| pagecache::KEYS.contains(&k.as_str()));
        let dev = Self {
            kind: self.kind.clone(),
            options: own,
        }
        .open_device()?;
        if cache.is_empty() {
            return Ok(dev);
        }
        let mut opts = PageCacheOptions::default();
        for (k, v) in &cache {
            opts.set(k, v)?;
        }
        Ok(Arc::new(PageCache::new(dev, opts)?))
    }

    fn open_device(&self) -> Result<DeviceRef> {
        match &self.kind {
            DeviceKind::Mem => {
                let mut cfg = MemConfig::default();
                for (k, v) in &self.options {
                    cfg.set(k, v)?;
                }
                Ok(Arc::new(MemDevice::new(cfg)?))
            }
            DeviceKind::File(path) => {
                let mut opts = FileOptions::default();
                for (k, v) in &self.options {
                    opts.set(k, v)?;
                }
                Ok(Arc::new(FileDevice::open(path, opts)?))
            }
            DeviceKind::Preset(name) if name == "hdd-15k" => {
                let mut cfg = HddConfig::preset(name)?;
                for (k, v) in &self.options {
                    cfg.set(k, v)?;
                }
                Ok(Arc::new(Hdd::new(cfg)?))
            }
            DeviceKind::Preset(name) if name.starts_with("raid0-") => {
                Ok(Arc::new(raid0_preset(name, &self.options)?))
            }
            DeviceKind::Preset(name) => {
                let mut cfg = SsdConfig::preset(name)?;
                for (k, v) in &self.options {
                    cfg.set(k, v)?;
                }
                cfg.validate()?;
                Ok(Arc::new(Ssd::new(cfg)?))
            }
        }
    }
}

impl std::str::FromStr for DeviceSpec {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms() {
        let s = DeviceSpec::parse("sata-ssd,capacity=1GiB,op=0.07").unwrap();
        assert_eq!(s.kind, DeviceKind::Preset("sata-ssd".into()));
        assert_eq!(s.options.len(), 2);
        assert_eq!(
            DeviceSpec::parse("file:/tmp/x").unwrap().kind,
            DeviceKind::File("/tmp/x".into())
        );
        assert_eq!(DeviceSpec::parse("mem").unwrap().kind, DeviceKind::Mem);
        assert!(DeviceSpec::parse("floppy").is_err());
        assert!(DeviceSpec::parse("sata-ssd,capacity").is_err());
        assert!(DeviceSpec::parse("file:").is_err());
        let f = DeviceSpec::parse("file:/tmp/a,b/x.db,direct=1,capacity=1GiB").unwrap();
        assert_eq!(f.kind, DeviceKind::File("/tmp/a,b/x.db".into()));
        assert_eq!(f.options.len(), 2);
        assert_eq!(
            DeviceSpec::parse("raid0-4x-hdd-15k").unwrap().kind,
            DeviceKind::Preset("raid0-4x-hdd-15k".into())
        );
    }

    #[test]
    fn every_preset_opens() {
        for p in PRESETS {
            let d = DeviceSpec::parse(&format!("{p},capacity=1GiB"))
                .unwrap()
                .open();
            let d = d.unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(d.caps().capacity_bytes(), 1 << 30, "{p}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev");
        let d = DeviceSpec::parse(&format!("file:{},capacity=1MiB", path.display()))
            .unwrap()
            .open()
            .unwrap();
        assert_eq!(d.caps().capacity_sectors, 256);
        assert!(DeviceSpec::parse("hdd-15k,wobble=1")
            .unwrap()
            .open()
            .is_err());
        assert!(DeviceSpec::parse("sata-ssd,op=-3").unwrap().open().is_err());
    }

    #[test]
    fn mem_opens_with_keys() {
        let d = DeviceSpec::parse("mem,capacity=64MiB,streams=2")
            .unwrap()
            .open()
            .unwrap();
        assert_eq!(d.caps().capacity_sectors, 16384);
        assert!(DeviceSpec::parse("mem,wat=1").unwrap().open().is_err());
    }

    #[test]
    fn pagecache_wraps_any_device_and_names_its_key_when_wrong() {
        let d = DeviceSpec::parse("sata-ssd,capacity=1GiB,pagecache=8MiB")
            .unwrap()
            .open()
            .unwrap();
        assert!(
            d.describe().starts_with("pagecache(8 MiB"),
            "{}",
            d.describe()
        );
        assert_eq!(
            d.caps().atomic_write_unit,
            None,
            "buffered I/O is not atomic"
        );
        let dir = tempfile::tempdir().unwrap();
        let f = format!(
            "file:{},capacity=1MiB,pagecache=4MiB",
            dir.path().join("d").display()
        );
        let d = DeviceSpec::parse(&f).unwrap().open().unwrap();
        assert!(d.stats().page_cache.is_some());
        for (bad, key) in [
            ("mem,pagecache=lots", "pagecache=lots"),
            ("mem,pagecache=4KiB", "pagecache="),
            ("mem,pagecache_request=64KiB", "pagecache="),
            (
                "mem,pagecache=8MiB,pagecache_request=6KiB",
                "pagecache_request=",
            ),
            ("mem,pagecache=8MiB,pagecache_depth=0", "pagecache_depth="),
            ("mem,pagecache=8MiB,pagecache_depth=x", "pagecache_depth=x"),
        ] {
            let e = DeviceSpec::parse(bad).unwrap().open().expect_err(bad);
            assert!(matches!(e, DeviceError::Config(_)), "{bad}: {e}");
            assert!(e.to_string().contains(key), "{bad}: {e}");
        }
    }
}

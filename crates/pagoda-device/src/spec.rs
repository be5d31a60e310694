//! Device strings of the command line (CLI.md): `file:PATH`, `mem[,key=value...]`,
//! `PRESET[,key=value,...]` with PRESET one of `sata-ssd`, `nvme-ssd`, `hdd-15k`,
//! `raid0-8x-hdd-15k`.

use crate::error::{DeviceError, Result};
use crate::mem::{MemConfig, MemDevice};
use crate::DeviceRef;
use std::path::PathBuf;
use std::sync::Arc;

/// The emulated presets a user can name.
pub const PRESETS: [&str; 4] = ["sata-ssd", "nvme-ssd", "hdd-15k", "raid0-8x-hdd-15k"];

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
        if let Some(path) = text.strip_prefix("file:") {
            if path.is_empty() {
                return Err(DeviceError::config(
                    "file: needs a path, e.g. file:/tmp/pagoda.data",
                ));
            }
            // Options after a comma are allowed for files too (direct=1).
            let (path, opts) = match path.split_once(",direct=") {
                Some((p, v)) => (p, vec![("direct".to_string(), v.to_string())]),
                None => (path, Vec::new()),
            };
            return Ok(Self {
                kind: DeviceKind::File(PathBuf::from(path)),
                options: opts,
            });
        }
        let mut parts = text.split(',');
        let name = parts.next().unwrap_or_default().trim();
        let kind = if name == "mem" {
            DeviceKind::Mem
        } else if PRESETS.contains(&name) {
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

    /// Opens the device this spec names.
    pub fn open(&self) -> Result<DeviceRef> {
        match &self.kind {
            DeviceKind::Mem => {
                let mut cfg = MemConfig::default();
                for (k, v) in &self.options {
                    cfg.set(k, v)?;
                }
                Ok(Arc::new(MemDevice::new(cfg)?))
            }
            DeviceKind::File(path) => Err(DeviceError::Unsupported(format!(
                "file devices are not built yet ({})",
                path.display()
            ))),
            DeviceKind::Preset(name) => Err(DeviceError::Unsupported(format!(
                "preset {name} is not built yet"
            ))),
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
    }

    #[test]
    fn mem_opens_with_keys() {
        let d = DeviceSpec::parse("mem,capacity=64MiB,streams=2").unwrap().open().unwrap();
        assert_eq!(d.caps().capacity_sectors, 16384);
        assert!(DeviceSpec::parse("mem,wat=1").unwrap().open().is_err());
    }
}

//! `--log data-partition,size=SIZE`: the log on the last SIZE bytes of the --data device, so data,
//! double-write area and log share one (emulated) SSD, as InnoDB's files share one drive in the
//! DWB-FTL paper. The data device is split in two partitions (`pagoda_device::partition`); the
//! engine's streams keep the log (stream 1) apart from pages (2) and the double-write area (3).

use crate::error::{CliError, CliResult};
use pagoda_device::partition;
use pagoda_device::spec::DeviceSpec;
use pagoda_device::units::parse_size;
use pagoda_device::DeviceRef;
use std::sync::Arc;

/// The name `--log` takes for a partition of the data device.
pub(super) const NAME: &str = "data-partition";

/// The log partition's size in bytes if `--log` names one; `None` for an ordinary device.
pub(crate) fn parse(log: Option<&str>) -> CliResult<Option<u64>> {
    let Some(text) = log else {
        return Ok(None);
    };
    let mut parts = text.trim().split(',');
    if parts.next().map(str::trim) != Some(NAME) {
        return Ok(None);
    }
    let usage = |what: &str| {
        CliError::Usage(format!(
            "--log {text}: {what}; write --log {NAME},size=SIZE (e.g. size=64MiB), the last SIZE \
             bytes of the --data device"
        ))
    };
    let mut size = None;
    for part in parts.map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some(("size", v)) => size = Some(parse_size(v.trim())?),
            _ => return Err(usage(&format!("unknown option '{part}'"))),
        }
    }
    match size {
        Some(s) if s > 0 && s % 4096 == 0 => Ok(Some(s)),
        Some(_) => Err(usage("size must be a positive multiple of 4 KiB")),
        None => Err(usage("no size given")),
    }
}

/// Opens `data` and splits it: (data pages, log), the log the last `size` bytes.
pub(super) fn open(data: &DeviceSpec, size: u64) -> CliResult<(DeviceRef, DeviceRef)> {
    let (head, tail) = partition::split(data.open()?, size)?;
    Ok((Arc::new(head), Arc::new(tail)))
}

/// Refuses a log partition without a --data device to cut it from.
pub(super) fn check(size: Option<u64>, data: Option<&DeviceSpec>) -> CliResult<()> {
    if size.is_some() && data.is_none() {
        return Err(CliError::Usage(format!(
            "--log {NAME} is a part of the --data device: give --data too (e.g. --data \
             sata-ssd,capacity=1GiB)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling() {
        assert_eq!(parse(None).expect("none"), None);
        assert_eq!(parse(Some("sata-ssd,capacity=1GiB")).expect("ssd"), None);
        assert_eq!(
            parse(Some("data-partition,size=64MiB")).expect("part"),
            Some(64 << 20)
        );
        for bad in [
            "data-partition",
            "data-partition,size=0",
            "data-partition,size=1000",
            "data-partition,size=64MiB,streams=2",
            "data-partition,64MiB",
        ] {
            let e = parse(Some(bad)).expect_err(bad);
            assert!(e.to_string().contains("size"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_partition_needs_data() {
        assert!(check(Some(1 << 20), None).is_err());
        assert!(check(None, None).is_ok());
    }
}

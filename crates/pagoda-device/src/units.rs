//! Parsing of human sizes (`4096`, `64KiB`, `256MiB`, `2GiB`, `1.5GB`) and durations
//! (`30s`, `2m`, `500ms`), shared by device specs and the CLI.

use crate::error::{DeviceError, Result};
// Formatting lives in `human` so that error messages can use it without a cycle.
pub use crate::human::format_size;
use std::time::Duration;

/// Parses a byte size. Binary (`KiB`, `MiB`, `GiB`, `TiB`, also `K`, `M`, `G`, `T`) and decimal
/// (`KB`, `MB`, `GB`, `TB`) suffixes are accepted, case-insensitively.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        DeviceError::config(format!(
            "cannot read size '{text}': write a number with an optional unit, e.g. 4096, 64KiB, 256MiB, 2GiB"
        ))
    };
    if num.is_empty() {
        return Err(bad());
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    if num.contains('.') {
        let v: f64 = num.parse().map_err(|_| bad())?;
        let bytes = v * mult as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(bytes.round() as u64)
    } else {
        let v: u64 = num.parse().map_err(|_| bad())?;
        v.checked_mul(mult).ok_or_else(bad)
    }
}

/// Parses a duration: `30s`, `2m`, `1h`, `500ms`, `250us`; a bare number means seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        DeviceError::config(format!(
            "cannot read duration '{text}': write e.g. 30s, 2m, 500ms"
        ))
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(bad()),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("10GB").unwrap(), 10_000_000_000);
        assert!(parse_size("").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("-1").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("soon").is_err());
    }

    proptest::proptest! {
        #[test]
        fn size_parser_never_panics(s in ".{0,24}") {
            let _ = parse_size(&s);
            let _ = parse_duration(&s);
        }

        #[test]
        fn size_roundtrip(v in 0u64..(1u64 << 40)) {
            proptest::prop_assert_eq!(parse_size(&v.to_string()).unwrap(), v);
            proptest::prop_assert_eq!(parse_size(&format!("{v}KiB")).unwrap(), v * 1024);
        }
    }
}

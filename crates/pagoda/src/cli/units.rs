//! Sizes and durations as flag types: clap parses them when it reads the flag, so a bad value
//! is a usage error naming the flag before anything runs, and the text as given is kept for
//! the report's configuration (`"buffer": "64MiB"`).

use pagoda_device::units::{parse_duration, parse_size};
use serde::{Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A count of at least one (threads, repeats) as a flag takes it: 0 is refused by clap,
/// naming the flag.
pub fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

/// A byte size as a flag takes it (`4096`, `64KiB`, `256MiB`, `2GiB`, `1.5GB`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Size {
    bytes: u64,
    text: String,
}

impl Size {
    /// The size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bytes = parse_size(s).map_err(|e| e.to_string())?;
        Ok(Self {
            bytes,
            text: s.trim().to_string(),
        })
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// A duration as a flag takes it (`30s`, `2m`, `500ms`; a bare number is seconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    duration: Duration,
    text: String,
}

impl Span {
    /// The duration.
    pub fn duration(&self) -> Duration {
        self.duration
    }
}

impl FromStr for Span {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let duration = parse_duration(s).map_err(|e| e.to_string())?;
        Ok(Self {
            duration,
            text: s.trim().to_string(),
        })
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_keep_their_text_and_their_value() {
        let s: Size = "64MiB".parse().unwrap();
        assert_eq!((s.bytes(), s.to_string()), (64 << 20, "64MiB".to_string()));
        assert_eq!(serde_json::to_value(&s).unwrap(), "64MiB");
        let d: Span = "500ms".parse().unwrap();
        assert_eq!(d.duration(), Duration::from_millis(500));
        assert_eq!(d.to_string(), "500ms");
        let e = "64 parsecs".parse::<Size>().unwrap_err();
        assert!(e.contains("cannot read size '64 parsecs'"), "{e}");
        let e = "soon".parse::<Span>().unwrap_err();
        assert!(e.contains("cannot read duration 'soon'"), "{e}");
    }
}

//! Stream rules: `NAME=FILE[:START-END]` tags the writes to a byte range of a file with a named
//! device stream (the DWB-FTL paper's separation of InnoDB's double-write buffer,
//! `dwb=ibdata1:1MiB-3MiB`).
//!
//! FILE without a `/` matches a file of that name in any directory; with one it matches the
//! path from the file system's root (leading `/` optional). Names get stream ids in order of
//! first appearance, from 1; everything no rule matches goes on stream 0.

use pagoda_device::units::parse_size;

/// A rule that does not parse, with the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamRuleError {
    /// No `=` between the stream name and its range.
    #[error("stream rule '{0}' has no '=': write NAME=FILE:START-END, e.g. dwb=ibdata1:1MiB-3MiB")]
    NoEquals(String),
    /// A stream name that is empty or has other characters than `[A-Za-z0-9_-]`.
    #[error("stream rule '{0}': the stream name is empty or not [A-Za-z0-9_-]")]
    BadName(String),
    /// No file name before the range.
    #[error("stream rule '{0}': the file name is empty")]
    NoFile(String),
    /// A range that does not parse.
    #[error("stream rule '{rule}': cannot read the range '{range}': write START-END with sizes, e.g. 1MiB-3MiB")]
    BadRange {
        /// The whole rule.
        rule: String,
        /// The range part.
        range: String,
    },
    /// A range whose end does not exceed its start.
    #[error("stream rule '{rule}': the range is empty or backwards ({start}-{end}); END must exceed START")]
    EmptyRange {
        /// The whole rule.
        rule: String,
        /// Start of the range, bytes.
        start: u64,
        /// End of the range, bytes.
        end: u64,
    },
    /// A range not on 4 KiB boundaries.
    #[error("stream rule '{rule}': the range {start}-{end} is not 4 KiB aligned; streams tag whole 4 KiB sectors")]
    Unaligned {
        /// The whole rule.
        rule: String,
        /// Start of the range, bytes.
        start: u64,
        /// End of the range, bytes.
        end: u64,
    },
    /// More stream names than the device has streams for.
    #[error("too many stream names ({0}): at most 15")]
    TooMany(usize),
}

/// One parsed rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRule {
    /// The stream's name (`dwb`).
    pub name: String,
    /// The file: a bare name, or a path from the root without the leading `/`.
    pub file: String,
    /// Byte range `[start, end)`; `None` for the whole file.
    pub range: Option<(u64, u64)>,
    /// Device stream id (1-based order of first appearance of `name`).
    pub stream: u16,
}

impl StreamRule {
    /// Parses one rule; `stream` is filled in by [`StreamRules::parse`].
    pub fn parse(text: &str) -> Result<Self, StreamRuleError> {
        let t = text.trim();
        let (name, rest) = t
            .split_once('=')
            .ok_or_else(|| StreamRuleError::NoEquals(t.to_string()))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(StreamRuleError::BadName(t.to_string()));
        }
        // The range follows the last ':' only when that part looks like one (file names may
        // contain ':').
        let (file, range) = match rest.rsplit_once(':') {
            Some((f, r)) if r.contains('-') => (f, Some(r)),
            _ => (rest, None),
        };
        let file = file.trim().trim_start_matches('/');
        if file.is_empty() {
            return Err(StreamRuleError::NoFile(t.to_string()));
        }
        let range = match range {
            None => None,
            Some(r) => {
                let bad = || StreamRuleError::BadRange {
                    rule: t.to_string(),
                    range: r.to_string(),
                };
                let (a, b) = r.split_once('-').ok_or_else(bad)?;
                let start = parse_size(a).map_err(|_| bad())?;
                let end = parse_size(b).map_err(|_| bad())?;
                if end <= start {
                    return Err(StreamRuleError::EmptyRange {
                        rule: t.to_string(),
                        start,
                        end,
                    });
                }
                if !start.is_multiple_of(4096) || !end.is_multiple_of(4096) {
                    return Err(StreamRuleError::Unaligned {
                        rule: t.to_string(),
                        start,
                        end,
                    });
                }
                Some((start, end))
            }
        };
        Ok(Self {
            name: name.to_string(),
            file: file.to_string(),
            range,
            stream: 0,
        })
    }

    /// Whether this rule names `path` (from the root, no leading `/`).
    fn matches(&self, path: &str) -> bool {
        if self.file.contains('/') {
            path == self.file
        } else {
            path.rsplit('/').next() == Some(self.file.as_str())
        }
    }
}

/// All rules of a mount.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamRules {
    rules: Vec<StreamRule>,
    names: Vec<String>,
}

impl StreamRules {
    /// Parses the rules in order and numbers their streams.
    pub fn parse<S: AsRef<str>>(texts: &[S]) -> Result<Self, StreamRuleError> {
        let mut out = Self::default();
        for t in texts {
            let mut r = StreamRule::parse(t.as_ref())?;
            let id = match out.names.iter().position(|n| *n == r.name) {
                Some(i) => i,
                None => {
                    out.names.push(r.name.clone());
                    out.names.len() - 1
                }
            };
            if out.names.len() > 15 {
                return Err(StreamRuleError::TooMany(out.names.len()));
            }
            r.stream = (id + 1) as u16;
            out.rules.push(r);
        }
        Ok(out)
    }

    /// Streams the device needs: 1 + the number of names.
    pub fn streams_needed(&self) -> u16 {
        1 + self.names.len() as u16
    }

    /// `(id, name)` of every stream, stream 0 (`default`) first.
    pub fn names(&self) -> Vec<(u16, String)> {
        std::iter::once((0, "default".to_string()))
            .chain(
                self.names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| ((i + 1) as u16, n.clone())),
            )
            .collect()
    }

    /// The rules.
    pub fn rules(&self) -> &[StreamRule] {
        &self.rules
    }

    /// The ranges that apply to the file at `path`, as `(start, end, stream)`; `None` when no
    /// rule names it (the common case: its writes go on stream 0 without a lookup).
    pub(crate) fn for_path(&self, path: &str) -> Option<Vec<(u64, u64, u16)>> {
        let v: Vec<_> = self
            .rules
            .iter()
            .filter(|r| r.matches(path))
            .map(|r| {
                let (s, e) = r.range.unwrap_or((0, u64::MAX));
                (s, e, r.stream)
            })
            .collect();
        (!v.is_empty()).then_some(v)
    }
}

/// The stream of the sector at byte `offset` under `ranges` (first match wins).
pub(crate) fn stream_at(ranges: Option<&[(u64, u64, u16)]>, offset: u64) -> u16 {
    ranges
        .and_then(|rs| rs.iter().find(|(s, e, _)| offset >= *s && offset < *e))
        .map_or(0, |r| r.2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_innodb_rule() {
        let r = StreamRules::parse(&["dwb=ibdata1:1MiB-3MiB"]).unwrap();
        assert_eq!(r.streams_needed(), 2);
        let rule = &r.rules()[0];
        assert_eq!(rule.range, Some((1 << 20, 3 << 20)));
        assert_eq!(rule.stream, 1);
        let ranges = r.for_path("ibdata1").unwrap();
        assert_eq!(stream_at(Some(&ranges), 0), 0);
        assert_eq!(stream_at(Some(&ranges), 1 << 20), 1);
        assert_eq!(stream_at(Some(&ranges), (3 << 20) - 4096), 1);
        assert_eq!(stream_at(Some(&ranges), 3 << 20), 0);
        assert!(r.for_path("db/ibdata1").is_some());
        assert!(r.for_path("ibdata10").is_none());
    }

    #[test]
    fn paths_names_and_errors() {
        let r = StreamRules::parse(&["log=/d/ib_logfile0", "dwb=x:0-4KiB", "log=y"]).unwrap();
        assert_eq!(r.streams_needed(), 3);
        assert!(r.for_path("d/ib_logfile0").is_some());
        assert!(r.for_path("e/ib_logfile0").is_none());
        assert_eq!(r.rules()[2].stream, 1);
        assert!(matches!(
            StreamRule::parse("dwb"),
            Err(StreamRuleError::NoEquals(_))
        ));
        assert!(matches!(
            StreamRule::parse("=f:0-4096"),
            Err(StreamRuleError::BadName(_))
        ));
        assert!(matches!(
            StreamRule::parse("d=:0-4096"),
            Err(StreamRuleError::NoFile(_))
        ));
        assert!(matches!(
            StreamRule::parse("d=f:zz-4096"),
            Err(StreamRuleError::BadRange { .. })
        ));
        assert!(matches!(
            StreamRule::parse("d=f:8KiB-4KiB"),
            Err(StreamRuleError::EmptyRange { .. })
        ));
        assert!(matches!(
            StreamRule::parse("d=f:1-4097"),
            Err(StreamRuleError::Unaligned { .. })
        ));
    }

    proptest! {
        // Any text: a rule or a typed error, never a panic.
        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = StreamRule::parse(&s);
        }

        // A well-formed rule round-trips its parts.
        #[test]
        fn well_formed_rules_parse(name in "[a-z][a-z0-9_]{0,8}", file in "[a-z][a-z0-9_.]{0,12}",
                                   a in 0u64..1000, len in 1u64..1000) {
            let text = format!("{name}={file}:{}-{}KiB", a * 4096, (a + len) * 4);
            let r = StreamRule::parse(&text).unwrap();
            prop_assert_eq!(r.name, name);
            prop_assert_eq!(r.file, file);
            prop_assert_eq!(r.range, Some((a * 4096, (a + len) * 4096)));
        }
    }
}

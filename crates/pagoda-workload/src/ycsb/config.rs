//! YCSB's parameters: the workload, the key and field-length distributions, and
//! [`YcsbConfig`] with its defaults, validation and key format.

use std::str::FromStr;

use serde::Serialize;

use crate::dist::fnv1a64;
use crate::error::ConfigError;

/// Largest record the generator will build: the bound [`YcsbConfig`] checks its field count
/// and lengths against.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// Which YCSB workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum YcsbWorkload {
    /// 50 % read, 50 % update, zipfian.
    A,
    /// 95 % read, 5 % update, zipfian.
    B,
    /// 100 % read, zipfian.
    C,
    /// 95 % read, 5 % insert, latest.
    D,
    /// 95 % scan, 5 % insert, zipfian.
    E,
    /// 50 % read, 50 % read-modify-write, zipfian.
    F,
    /// The WiredTiger (pipelined commit) paper's workload: 100 % update of one 1 KiB value,
    /// uniform (YCSB's keys by default; the paper's 20-byte keys with
    /// `insert_order = Ordered, zero_padding = 16`).
    #[serde(rename = "update-only")]
    UpdateOnly,
}

impl FromStr for YcsbWorkload {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "a" => YcsbWorkload::A,
            "b" => YcsbWorkload::B,
            "c" => YcsbWorkload::C,
            "d" => YcsbWorkload::D,
            "e" => YcsbWorkload::E,
            "f" => YcsbWorkload::F,
            "update-only" | "updateonly" => YcsbWorkload::UpdateOnly,
            _ => {
                return Err(ConfigError::OutOfRange {
                    what: "--workload",
                    value: s.to_string(),
                    fix: "use a, b, c, d, e, f or update-only".to_string(),
                })
            }
        })
    }
}

/// How keys are chosen for reads, updates and scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestDistribution {
    /// YCSB's scrambled zipfian (θ 0.99), popular keys scattered.
    Zipfian,
    /// Uniform over the loaded records.
    Uniform,
    /// Zipfian over insert order, newest hottest.
    Latest,
    /// A fraction of operations on a fraction of the records (80/20 by default).
    Hotspot,
}

impl FromStr for RequestDistribution {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "zipfian" => RequestDistribution::Zipfian,
            "uniform" => RequestDistribution::Uniform,
            "latest" => RequestDistribution::Latest,
            "hotspot" => RequestDistribution::Hotspot,
            _ => {
                return Err(ConfigError::OutOfRange {
                    what: "--distribution",
                    value: s.to_string(),
                    fix: "use zipfian, uniform, latest or hotspot".to_string(),
                })
            }
        })
    }
}

/// Order of key numbers in the key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InsertOrder {
    /// Key numbers are FNV-hashed (YCSB's default): inserts land all over the key space.
    Hashed,
    /// Key numbers are used as they are.
    Ordered,
}

impl FromStr for InsertOrder {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.to_ascii_lowercase().as_str() {
            "hashed" => Ok(InsertOrder::Hashed),
            "ordered" => Ok(InsertOrder::Ordered),
            _ => Err(ConfigError::OutOfRange {
                what: "--insert-order",
                value: s.to_string(),
                fix: "use hashed (YCSB's default) or ordered".to_string(),
            }),
        }
    }
}

/// Length of each field value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldLengthDistribution {
    /// Always `field_length`.
    Constant,
    /// Uniform in `1..=field_length`.
    Uniform,
    /// Zipfian in `1..=field_length` (short values most common).
    Zipfian,
}

/// Operation proportions (sum 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Proportions {
    /// READ.
    pub read: f64,
    /// UPDATE.
    pub update: f64,
    /// INSERT.
    pub insert: f64,
    /// SCAN.
    pub scan: f64,
    /// READ-MODIFY-WRITE.
    pub read_modify_write: f64,
}

/// A YCSB workload's parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct YcsbConfig {
    /// The workload (sets the proportions).
    pub workload: YcsbWorkload,
    /// Records loaded (`recordcount`).
    pub record_count: u64,
    /// Fields per record (`fieldcount`).
    pub field_count: usize,
    /// Bytes per field (`fieldlength`).
    pub field_length: usize,
    /// Field length distribution.
    pub field_length_distribution: FieldLengthDistribution,
    /// Request distribution.
    pub distribution: RequestDistribution,
    /// Hotspot: fraction of the records that is hot.
    pub hotspot_data_fraction: f64,
    /// Hotspot: fraction of operations on the hot records.
    pub hotspot_op_fraction: f64,
    /// Key order.
    pub insert_order: InsertOrder,
    /// Key numbers are left-padded with zeros to this many digits.
    pub zero_padding: usize,
    /// SCAN length is uniform in `1..=max_scan_length`.
    pub max_scan_length: usize,
    /// Records per load transaction.
    pub load_batch: usize,
    /// Table name.
    pub table: String,
}

impl YcsbConfig {
    /// The workload's defaults (YCSB's for A–F; the WiredTiger paper's for update-only) with
    /// `record_count` records.
    pub fn new(workload: YcsbWorkload, record_count: u64) -> Self {
        let mut c = YcsbConfig {
            workload,
            record_count,
            field_count: 10,
            field_length: 100,
            field_length_distribution: FieldLengthDistribution::Constant,
            distribution: RequestDistribution::Zipfian,
            hotspot_data_fraction: 0.2,
            hotspot_op_fraction: 0.8,
            insert_order: InsertOrder::Hashed,
            zero_padding: 1,
            max_scan_length: 100,
            load_batch: 100,
            table: "usertable".to_string(),
        };
        match workload {
            YcsbWorkload::D => c.distribution = RequestDistribution::Latest,
            YcsbWorkload::UpdateOnly => {
                // One 1 KiB value; the key space is every workload's, so one load serves all.
                c.field_count = 1;
                c.field_length = 1024;
                c.distribution = RequestDistribution::Uniform;
            }
            _ => {}
        }
        c
    }

    /// The workload's operation mix.
    pub fn proportions(&self) -> Proportions {
        let p = |read, update, insert, scan, read_modify_write| Proportions {
            read,
            update,
            insert,
            scan,
            read_modify_write,
        };
        match self.workload {
            YcsbWorkload::A => p(0.5, 0.5, 0.0, 0.0, 0.0),
            YcsbWorkload::B => p(0.95, 0.05, 0.0, 0.0, 0.0),
            YcsbWorkload::C => p(1.0, 0.0, 0.0, 0.0, 0.0),
            YcsbWorkload::D => p(0.95, 0.0, 0.05, 0.0, 0.0),
            YcsbWorkload::E => p(0.0, 0.0, 0.05, 0.95, 0.0),
            YcsbWorkload::F => p(0.5, 0.0, 0.0, 0.0, 0.5),
            YcsbWorkload::UpdateOnly => p(0.0, 1.0, 0.0, 0.0, 0.0),
        }
    }

    /// Rejects parameters that cannot run, before any work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.record_count == 0 {
            return Err(ConfigError::Zero {
                what: "--records",
                fix: "load at least 1 record",
            });
        }
        if self.field_count == 0 {
            return Err(ConfigError::Zero {
                what: "--field-count",
                fix: "use at least 1 field per record",
            });
        }
        if self.field_length == 0 {
            return Err(ConfigError::Zero {
                what: "--field-length",
                fix: "use at least 1 byte per field",
            });
        }
        let record = self
            .field_count
            .saturating_mul(self.field_length.saturating_add(4));
        if record > MAX_RECORD_BYTES {
            return Err(ConfigError::OutOfRange {
                what: "--field-count x --field-length",
                value: format!("{record} bytes per record"),
                fix: format!(
                    "keep a record under {} MiB (fewer or shorter fields)",
                    MAX_RECORD_BYTES >> 20
                ),
            });
        }
        if self.max_scan_length == 0 {
            return Err(ConfigError::Zero {
                what: "max scan length",
                fix: "use a maximum scan length of at least 1",
            });
        }
        if self.load_batch == 0 {
            return Err(ConfigError::Zero {
                what: "load batch",
                fix: "load at least 1 record per transaction",
            });
        }
        if self.zero_padding > 32 {
            return Err(ConfigError::OutOfRange {
                what: "zero padding",
                value: self.zero_padding.to_string(),
                fix: "pad key numbers to at most 32 digits".to_string(),
            });
        }
        for (what, v) in [
            ("hotspot data fraction", self.hotspot_data_fraction),
            ("hotspot operation fraction", self.hotspot_op_fraction),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(ConfigError::OutOfRange {
                    what,
                    value: v.to_string(),
                    fix: "use a fraction in (0, 1], e.g. 0.2".to_string(),
                });
            }
        }
        if self.table.is_empty() {
            return Err(ConfigError::OutOfRange {
                what: "table",
                value: String::new(),
                fix: "name the table, e.g. usertable".to_string(),
            });
        }
        Ok(())
    }

    /// The key of record number `keynum`: `"user"` + the (hashed) number, zero-padded.
    pub fn key(&self, keynum: u64) -> Vec<u8> {
        let n = match self.insert_order {
            InsertOrder::Hashed => fnv1a64(keynum),
            InsertOrder::Ordered => keynum,
        };
        format!("user{n:0width$}", width = self.zero_padding).into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_ycsb() {
        let c = YcsbConfig::new(YcsbWorkload::A, 10);
        assert_eq!(c.key(0), b"user6284781860667377211");
        assert_eq!(c.key(1), b"user8517097267634966620");
        // One key space for every workload: update-only's keys are A's.
        let mut u = YcsbConfig::new(YcsbWorkload::UpdateOnly, 10);
        assert_eq!(
            (u.insert_order, u.zero_padding),
            (c.insert_order, c.zero_padding)
        );
        assert_eq!(u.key(1), c.key(1));
        // The WiredTiger paper's 20-byte keys, asked for explicitly.
        u.insert_order = InsertOrder::Ordered;
        u.zero_padding = 16;
        assert_eq!(u.key(42), b"user0000000000000042");
    }
}

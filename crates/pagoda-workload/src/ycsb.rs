//! YCSB core workloads A–F and seed 002's update-only workload.
//!
//! Record encoding (one value per key): with one field the value is the field's bytes as they
//! are (so update-only's value is exactly 1 KiB); with several, the fields `field0..` follow
//! each other in order, each as a 4-byte little-endian length and its bytes. Field names are
//! implied by position.

use std::str::FromStr;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::dist::{fnv1a64, AckCounter, Hotspot, Latest, ScrambledZipfian, Zipfian};
use crate::driver::{
    self, DriverConfig, Finish, LoadReport, OpStatus, ProgressFn, RunLimit, Submitted, TxnRunner,
    Worker, Workload,
};
use crate::error::{ConfigError, WorkloadError};
use crate::report::RunReport;
use crate::store::{Store, StoreError};

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
    /// Seed 002: 100 % update of one 1 KiB value with a 20-byte key, uniform.
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
    /// The workload's defaults (YCSB's for A–F; seed 002's for update-only) with
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
                // 20-byte keys ("user" + 16 digits) and one 1 KiB value.
                c.field_count = 1;
                c.field_length = 1024;
                c.distribution = RequestDistribution::Uniform;
                // Key numbers as they are: a hashed number has up to 20 digits.
                c.insert_order = InsertOrder::Ordered;
                c.zero_padding = 16;
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

/// Largest record the generator will build.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// Operation names as YCSB prints them, in report order.
pub const OP_NAMES: [&str; 5] = ["READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"];
const READ: usize = 0;
const UPDATE: usize = 1;
const INSERT: usize = 2;
const SCAN: usize = 3;
const RMW: usize = 4;

/// Encodes a record's fields into one value (see the module docs).
pub fn encode_record(fields: &[Vec<u8>]) -> Vec<u8> {
    if let [only] = fields {
        return only.clone();
    }
    let mut v = Vec::with_capacity(fields.iter().map(|f| f.len() + 4).sum());
    for f in fields {
        v.extend_from_slice(&(f.len() as u32).to_le_bytes());
        v.extend_from_slice(f);
    }
    v
}

/// Decodes a value written by [`encode_record`] with `field_count` fields.
pub fn decode_record(value: &[u8], field_count: usize) -> Result<Vec<Vec<u8>>, StoreError> {
    if field_count == 1 {
        return Ok(vec![value.to_vec()]);
    }
    let bad = || StoreError::Other("corrupt YCSB record: field lengths overrun the value".into());
    let mut fields = Vec::with_capacity(field_count);
    let mut rest = value;
    while !rest.is_empty() {
        let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(bad());
        }
        fields.push(tail[..len].to_vec());
        rest = &tail[len..];
    }
    if fields.len() != field_count {
        return Err(StoreError::Other(format!(
            "YCSB record has {} fields, expected {field_count}; reload with the same --field-count",
            fields.len()
        )));
    }
    Ok(fields)
}

/// Fills `len` printable ASCII bytes (`!`..`~`): random bytes scaled into the 94 printable
/// ones by a multiply and shift (a division per byte made value generation a tenth of a
/// benchmark client's CPU).
fn printable(rng: &mut SmallRng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    for b in &mut v {
        *b = b'!' + ((u16::from(*b) * 94) >> 8) as u8;
    }
    v
}

/// Draws field lengths.
#[derive(Debug, Clone)]
struct FieldLengths {
    dist: FieldLengthDistribution,
    max: usize,
    zipf: Option<Zipfian>,
}

impl FieldLengths {
    fn new(cfg: &YcsbConfig) -> Self {
        let zipf = (cfg.field_length_distribution == FieldLengthDistribution::Zipfian)
            .then(|| Zipfian::new(cfg.field_length as u64, crate::dist::ZIPFIAN_CONSTANT));
        FieldLengths {
            dist: cfg.field_length_distribution,
            max: cfg.field_length,
            zipf,
        }
    }

    fn sample(&self, rng: &mut SmallRng) -> usize {
        match (&self.dist, &self.zipf) {
            (FieldLengthDistribution::Uniform, _) => rng.gen_range(1..=self.max),
            (FieldLengthDistribution::Zipfian, Some(z)) => z.sample(rng) as usize + 1,
            _ => self.max,
        }
    }

    fn field(&self, rng: &mut SmallRng) -> Vec<u8> {
        let len = self.sample(rng);
        printable(rng, len)
    }

    fn record(&self, rng: &mut SmallRng, count: usize) -> Vec<Vec<u8>> {
        (0..count).map(|_| self.field(rng)).collect()
    }
}

/// Loads `cfg.record_count` records with `threads` loader threads (each transaction inserts
/// `cfg.load_batch` records). Creates the table.
pub fn load(
    store: &dyn Store,
    cfg: &YcsbConfig,
    threads: usize,
    seed: u64,
    progress: Option<ProgressFn<'_>>,
) -> Result<LoadReport, WorkloadError> {
    cfg.validate()?;
    driver::validate_threads(threads)?;
    driver::create_tables(store, &[&cfg.table])?;
    let batch = cfg.load_batch as u64;
    let units = cfg.record_count.div_ceil(batch);
    let lengths = FieldLengths::new(cfg);
    let unit = |i: u64, txns: &mut TxnRunner| -> Result<u64, WorkloadError> {
        let first = i * batch;
        let last = (first + batch).min(cfg.record_count);
        let mut rng = SmallRng::seed_from_u64(driver::thread_seed(seed, i as usize));
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (first..last)
            .map(|k| {
                let fields = lengths.record(&mut rng, cfg.field_count);
                (cfg.key(k), encode_record(&fields))
            })
            .collect();
        txns.run(store, false, |t| {
            for (k, v) in &rows {
                t.put(&cfg.table, k, v)?;
            }
            Ok(Finish::Commit(()))
        })
        .map_err(|e| WorkloadError::store(format!("loading YCSB records {first}..{last}"), e))?;
        Ok(last - first)
    };
    driver::load_parallel("ycsb", threads, units, progress, &unit, 100)
}

/// Runs the transaction phase on a loaded table and reports it (`command` = `bench ycsb`).
pub fn run(
    store: &dyn Store,
    cfg: &YcsbConfig,
    driver_cfg: &DriverConfig,
    progress: Option<ProgressFn<'_>>,
) -> Result<RunReport, WorkloadError> {
    cfg.validate()?;
    driver_cfg.validate()?;
    preflight(store, cfg)?;
    let workload = YcsbRun::new(cfg, driver_cfg);
    let m = driver::run(store, &workload, driver_cfg, progress)?;
    let config =
        serde_json::json!({ "ycsb": cfg, "driver": driver_cfg, "store": store.describe() });
    Ok(RunReport::new("bench ycsb", config, &m, store))
}

/// Fails unless the first and last loaded records are there.
fn preflight(store: &dyn Store, cfg: &YcsbConfig) -> Result<(), WorkloadError> {
    let err = |e| WorkloadError::store("checking the YCSB table", e);
    let mut t = store.begin_read().map_err(err)?;
    for k in [0, cfg.record_count - 1] {
        if t.get(&cfg.table, &cfg.key(k)).map_err(err)?.is_none() {
            return Err(WorkloadError::NotLoaded {
                what: format!(
                    "table {} has no record {k} of --records {}",
                    cfg.table, cfg.record_count
                ),
            });
        }
    }
    let _ = t.commit();
    Ok(())
}

/// Shared state of a YCSB run.
#[derive(Debug)]
struct YcsbRun<'a> {
    cfg: &'a YcsbConfig,
    cumulative: [f64; 5],
    /// Key space of the zipfian chooser: the records plus twice the expected inserts, as YCSB.
    zipf_items: u64,
    inserts: AckCounter,
    lengths: FieldLengths,
    /// Built once: ζ over the record count is O(n), too slow to repeat per thread.
    latest: Latest,
}

impl<'a> YcsbRun<'a> {
    fn new(cfg: &'a YcsbConfig, d: &DriverConfig) -> Self {
        let p = cfg.proportions();
        let mut acc = 0.0;
        let mut cumulative = [0.0; 5];
        for (i, w) in [p.read, p.update, p.insert, p.scan, p.read_modify_write]
            .into_iter()
            .enumerate()
        {
            acc += w;
            cumulative[i] = acc;
        }
        let expected_inserts = match d.limit {
            RunLimit::Ops(n) => (n as f64 * p.insert * 2.0) as u64,
            RunLimit::Duration(_) => 0,
        };
        YcsbRun {
            cfg,
            cumulative,
            zipf_items: cfg.record_count + expected_inserts,
            inserts: AckCounter::new(cfg.record_count),
            lengths: FieldLengths::new(cfg),
            latest: if cfg.distribution == RequestDistribution::Latest {
                Latest::new(cfg.record_count)
            } else {
                Latest::new(1)
            },
        }
    }
}

enum Chooser {
    Zipfian(ScrambledZipfian),
    Uniform(u64),
    Latest(Latest),
    Hotspot(Hotspot),
}

struct YcsbWorker<'a> {
    run: &'a YcsbRun<'a>,
    rng: SmallRng,
    chooser: Chooser,
}

impl Workload for YcsbRun<'_> {
    fn op_names(&self) -> Vec<&'static str> {
        OP_NAMES.to_vec()
    }

    fn worker(&self, _thread: usize, seed: u64) -> Box<dyn Worker + '_> {
        let n = self.cfg.record_count;
        let chooser = match self.cfg.distribution {
            RequestDistribution::Zipfian => {
                Chooser::Zipfian(ScrambledZipfian::new(self.zipf_items))
            }
            RequestDistribution::Uniform => Chooser::Uniform(n),
            RequestDistribution::Latest => Chooser::Latest(self.latest.clone()),
            RequestDistribution::Hotspot => Chooser::Hotspot(Hotspot::new(
                n,
                self.cfg.hotspot_data_fraction,
                self.cfg.hotspot_op_fraction,
            )),
        };
        Box::new(YcsbWorker {
            run: self,
            rng: SmallRng::seed_from_u64(seed),
            chooser,
        })
    }
}

impl YcsbWorker<'_> {
    /// A key number whose insert has been acknowledged.
    fn next_keynum(&mut self) -> u64 {
        let limit = self.run.inserts.acknowledged();
        match &mut self.chooser {
            Chooser::Uniform(n) => self.rng.gen_range(0..*n),
            Chooser::Hotspot(h) => h.sample(&mut self.rng),
            Chooser::Latest(l) => l.sample(limit - 1, &mut self.rng),
            Chooser::Zipfian(z) => {
                // Keys past the acknowledged limit are drawn again, as YCSB does; folded
                // back after a while so a tiny table with a large insert budget cannot spin.
                for _ in 0..64 {
                    let k = z.sample(&mut self.rng);
                    if k < limit {
                        return k;
                    }
                }
                z.sample(&mut self.rng) % limit.max(1)
            }
        }
    }

    fn read(&mut self, store: &dyn Store, txns: &mut TxnRunner) -> Result<OpStatus, StoreError> {
        let cfg = self.run.cfg;
        let key = cfg.key(self.next_keynum());
        txns.run(store, true, |t| {
            Ok(Finish::Commit(match t.get(&cfg.table, &key)? {
                Some(v) => {
                    decode_record(&v, cfg.field_count)?;
                    OpStatus::Ok
                }
                None => OpStatus::NotFound,
            }))
        })
    }

    fn update(
        &mut self,
        store: &dyn Store,
        txns: &mut TxnRunner,
        read_first: bool,
    ) -> Result<OpStatus, StoreError> {
        let cfg = self.run.cfg;
        let key = cfg.key(self.next_keynum());
        let field = self.rng.gen_range(0..cfg.field_count);
        let new_value = self.run.lengths.field(&mut self.rng);
        txns.run(store, false, |t| {
            if cfg.field_count == 1 && !read_first {
                // The field is the whole value: a blind write, as a KV binding does.
                t.put(&cfg.table, &key, &new_value)?;
                return Ok(Finish::Commit(OpStatus::Ok));
            }
            let Some(old) = t.get(&cfg.table, &key)? else {
                return Ok(Finish::Rollback(OpStatus::NotFound));
            };
            let mut fields = decode_record(&old, cfg.field_count)?;
            fields[field].clone_from(&new_value);
            t.put(&cfg.table, &key, &encode_record(&fields))?;
            Ok(Finish::Commit(OpStatus::Ok))
        })
    }

    fn insert(&mut self, store: &dyn Store, txns: &mut TxnRunner) -> Result<OpStatus, StoreError> {
        let cfg = self.run.cfg;
        let keynum = self.run.inserts.next();
        let key = cfg.key(keynum);
        let value = encode_record(&self.run.lengths.record(&mut self.rng, cfg.field_count));
        let r = txns.run(store, false, |t| {
            t.put(&cfg.table, &key, &value)?;
            Ok(Finish::Commit(OpStatus::Ok))
        });
        // Acknowledged even when it failed, as YCSB does, so the limit keeps moving.
        self.run.inserts.acknowledge(keynum);
        r
    }

    fn scan(&mut self, store: &dyn Store, txns: &mut TxnRunner) -> Result<OpStatus, StoreError> {
        let cfg = self.run.cfg;
        let key = cfg.key(self.next_keynum());
        let len = self.rng.gen_range(1..=cfg.max_scan_length);
        txns.run(store, true, |t| {
            let rows = t.scan(&cfg.table, &key, None, len, false)?;
            for (_, v) in &rows {
                decode_record(v, cfg.field_count)?;
            }
            Ok(Finish::Commit(if rows.is_empty() {
                OpStatus::NotFound
            } else {
                OpStatus::Ok
            }))
        })
    }
}

impl Worker for YcsbWorker<'_> {
    fn step(
        &mut self,
        store: &dyn Store,
        txns: &mut TxnRunner,
    ) -> (usize, Result<OpStatus, StoreError>) {
        let u: f64 = self.rng.gen();
        let op = self
            .run
            .cumulative
            .iter()
            .position(|&c| u < c)
            .unwrap_or(READ);
        let r = match op {
            UPDATE => self.update(store, txns, false),
            INSERT => self.insert(store, txns),
            SCAN => self.scan(store, txns),
            RMW => self.update(store, txns, true),
            _ => self.read(store, txns),
        };
        (op, r)
    }

    /// Blind updates (update-only, and A/B's updates with one field) commit pipelined; every
    /// other operation runs synchronously.
    fn step_pipelined(
        &mut self,
        store: &dyn Store,
        txns: &mut TxnRunner,
    ) -> (usize, Result<Submitted<OpStatus>, StoreError>) {
        let u: f64 = self.rng.gen();
        let op = self
            .run
            .cumulative
            .iter()
            .position(|&c| u < c)
            .unwrap_or(READ);
        let cfg = self.run.cfg;
        if op == UPDATE && cfg.field_count == 1 {
            // The same draws as `update`, so both paths see the same operation stream.
            let key = cfg.key(self.next_keynum());
            let _field = self.rng.gen_range(0..cfg.field_count);
            let new_value = self.run.lengths.field(&mut self.rng);
            let r = txns.run_pipelined(store, |t| {
                t.put(&cfg.table, &key, &new_value)?;
                Ok(Finish::Commit(OpStatus::Ok))
            });
            return (op, r);
        }
        let r = match op {
            UPDATE => self.update(store, txns, false),
            INSERT => self.insert(store, txns),
            SCAN => self.scan(store, txns),
            RMW => self.update(store, txns, true),
            _ => self.read(store, txns),
        };
        (op, r.map(Submitted::Done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{render_text, render_ycsb};
    use crate::store::{MemStore, StoreTxn};

    #[test]
    fn values_are_printable_and_spread_over_all_94_characters() {
        let mut rng = SmallRng::seed_from_u64(7);
        let v = printable(&mut rng, 20_000);
        assert_eq!(v.len(), 20_000);
        assert!(v.iter().all(|b| (b'!'..=b'~').contains(b)));
        let mut seen = [0u32; 256];
        for &b in &v {
            seen[b as usize] += 1;
        }
        let used = seen.iter().filter(|&&n| n > 0).count();
        assert_eq!(used, 94, "characters used");
        let (lo, hi) = seen[33..=126]
            .iter()
            .fold((u32::MAX, 0), |(l, h), &n| (l.min(n), h.max(n)));
        assert!(hi < 2 * lo, "uneven: {lo}..{hi} per character");
    }

    fn loaded(cfg: &YcsbConfig) -> MemStore {
        let store = MemStore::new();
        let r = load(&store, cfg, 2, 42, None).unwrap();
        assert_eq!(r.rows, cfg.record_count);
        assert_eq!(store.table_len(&cfg.table) as u64, cfg.record_count);
        store
    }

    fn run_ops(store: &MemStore, cfg: &YcsbConfig, ops: u64) -> RunReport {
        let d = DriverConfig {
            threads: 2,
            limit: RunLimit::Ops(ops),
            seed: 7,
            ..DriverConfig::default()
        };
        let r = run(store, cfg, &d, None).unwrap();
        assert_eq!(r.ops, ops, "{}", render_text(&r));
        assert_eq!(r.errors, 0, "{:?}", r.first_error);
        r
    }

    fn share(r: &RunReport, op: &str) -> f64 {
        r.op(op).map_or(0, |o| o.count) as f64 / r.ops as f64
    }

    #[test]
    fn keys_follow_ycsb() {
        let c = YcsbConfig::new(YcsbWorkload::A, 10);
        assert_eq!(c.key(0), b"user6284781860667377211");
        assert_eq!(c.key(1), b"user8517097267634966620");
        let u = YcsbConfig::new(YcsbWorkload::UpdateOnly, 10);
        assert_eq!(u.key(42), b"user0000000000000042");
        assert_eq!(u.key(42).len(), 20);
    }

    #[test]
    fn record_encoding_round_trips_and_rejects_garbage() {
        let fields = vec![b"abc".to_vec(), Vec::new(), b"z".to_vec()];
        let v = encode_record(&fields);
        assert_eq!(decode_record(&v, 3).unwrap(), fields);
        assert!(decode_record(&v, 2).is_err());
        assert!(decode_record(&v[..v.len() - 1], 3).is_err());
        assert_eq!(encode_record(&[b"raw".to_vec()]), b"raw");
    }

    #[test]
    fn workload_a_mix_and_record_shape() {
        let cfg = YcsbConfig::new(YcsbWorkload::A, 1000);
        let store = loaded(&cfg);
        {
            let mut t = store.begin_read().unwrap();
            let v = t.get("usertable", &cfg.key(5)).unwrap().unwrap();
            let f = decode_record(&v, 10).unwrap();
            assert_eq!(f.len(), 10);
            assert!(f
                .iter()
                .all(|x| x.len() == 100 && x.iter().all(u8::is_ascii_graphic)));
        }
        let r = run_ops(&store, &cfg, 4000);
        assert!((share(&r, "READ") - 0.5).abs() < 0.04);
        assert!((share(&r, "UPDATE") - 0.5).abs() < 0.04);
        assert_eq!(r.op("READ").unwrap().not_found, 0);
        let text = render_ycsb(&r);
        assert!(text.starts_with("[OVERALL], RunTime(ms), "));
        assert!(text.contains("[OVERALL], Throughput(ops/sec), "));
        assert!(text.contains("[READ], Operations, "));
        assert!(text.contains("[UPDATE], 99thPercentileLatency(us), "));
        assert!(text.contains("[READ], Return=OK, "));
        assert!(!text.contains("[SCAN]"));
    }

    #[test]
    fn workloads_b_c_f_mixes() {
        for (w, op, expect) in [
            (YcsbWorkload::B, "UPDATE", 0.05),
            (YcsbWorkload::C, "READ", 1.0),
            (YcsbWorkload::F, "READ-MODIFY-WRITE", 0.5),
        ] {
            let cfg = YcsbConfig::new(w, 500);
            let store = loaded(&cfg);
            let r = run_ops(&store, &cfg, 3000);
            assert!((share(&r, op) - expect).abs() < 0.04, "{w:?}");
            assert_eq!(r.op("READ").unwrap().not_found, 0);
            assert_eq!(store.table_len("usertable"), 500);
        }
    }

    /// A store whose pipelined commits resolve only after a few polls (or a wait).
    struct SlowCommits {
        inner: MemStore,
        resolved: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    struct SlowTxn<'a>(
        Box<dyn StoreTxn + 'a>,
        std::sync::Arc<std::sync::atomic::AtomicU64>,
    );

    struct SlowPending(u32, std::sync::Arc<std::sync::atomic::AtomicU64>);

    impl crate::store::PendingCommit for SlowPending {
        fn poll(&mut self) -> Option<Result<(), StoreError>> {
            if self.0 == 0 {
                self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Some(Ok(()));
            }
            self.0 -= 1;
            None
        }
        fn wait(self: Box<Self>) -> Result<(), StoreError> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
    }

    impl StoreTxn for SlowTxn<'_> {
        fn get(&mut self, t: &str, k: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            self.0.get(t, k)
        }
        fn put(&mut self, t: &str, k: &[u8], v: &[u8]) -> Result<(), StoreError> {
            self.0.put(t, k, v)
        }
        fn delete(&mut self, t: &str, k: &[u8]) -> Result<bool, StoreError> {
            self.0.delete(t, k)
        }
        fn scan(
            &mut self,
            t: &str,
            s: &[u8],
            e: Option<&[u8]>,
            l: usize,
            r: bool,
        ) -> Result<crate::store::Rows, StoreError> {
            self.0.scan(t, s, e, l, r)
        }
        fn commit(self: Box<Self>) -> Result<(), StoreError> {
            self.0.commit()
        }
        fn commit_pipelined(
            self: Box<Self>,
        ) -> Result<Box<dyn crate::store::PendingCommit>, StoreError> {
            self.0.commit()?;
            Ok(Box::new(SlowPending(3, self.1)))
        }
        fn rollback(self: Box<Self>) -> Result<(), StoreError> {
            self.0.rollback()
        }
    }

    impl Store for SlowCommits {
        fn create_table(&self, name: &str) -> Result<(), StoreError> {
            self.inner.create_table(name)
        }
        fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
            Ok(Box::new(SlowTxn(
                self.inner.begin()?,
                self.resolved.clone(),
            )))
        }
        fn stats_json(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
        fn describe(&self) -> String {
            "slow".into()
        }
    }

    #[test]
    fn pipelined_updates_count_only_when_resolved() {
        let cfg = YcsbConfig::new(YcsbWorkload::UpdateOnly, 200);
        let store = SlowCommits {
            inner: loaded(&cfg),
            resolved: Default::default(),
        };
        let d = DriverConfig {
            threads: 2,
            limit: RunLimit::Ops(500),
            seed: 7,
            pipeline_depth: 4,
            ..DriverConfig::default()
        };
        let r = run(&store, &cfg, &d, None).unwrap();
        assert_eq!(r.ops, 500);
        assert_eq!(r.errors, 0);
        // Every counted update resolved (through a poll or a wait), none counted before.
        assert_eq!(
            store.resolved.load(std::sync::atomic::Ordering::Relaxed),
            500
        );
    }

    #[test]
    fn workload_d_reads_only_acknowledged_keys() {
        let cfg = YcsbConfig::new(YcsbWorkload::D, 300);
        let store = loaded(&cfg);
        let r = run_ops(&store, &cfg, 4000);
        let inserts = r.op("INSERT").unwrap().count;
        assert!((share(&r, "INSERT") - 0.05).abs() < 0.02);
        assert_eq!(store.table_len("usertable") as u64, 300 + inserts);
        // Latest: reads go to existing (and mostly new) keys, never to missing ones.
        assert_eq!(r.op("READ").unwrap().not_found, 0);
    }

    #[test]
    fn workload_e_scans() {
        let cfg = YcsbConfig::new(YcsbWorkload::E, 500);
        let store = loaded(&cfg);
        let r = run_ops(&store, &cfg, 2000);
        assert!((share(&r, "SCAN") - 0.95).abs() < 0.03);
        assert_eq!(r.op("SCAN").unwrap().errors, 0);
        let inserts = r.op("INSERT").unwrap().count;
        assert_eq!(store.table_len("usertable") as u64, 500 + inserts);
    }

    #[test]
    fn update_only_writes_one_kib_values() {
        let cfg = YcsbConfig::new(YcsbWorkload::UpdateOnly, 200);
        let store = loaded(&cfg);
        let r = run_ops(&store, &cfg, 1000);
        assert_eq!(r.op("UPDATE").unwrap().count, 1000);
        let mut t = store.begin_read().unwrap();
        let rows = t.scan("usertable", b"", None, usize::MAX, false).unwrap();
        assert_eq!(rows.len(), 200);
        assert!(rows.iter().all(|(k, v)| k.len() == 20 && v.len() == 1024));
    }

    #[test]
    fn uniform_and_hotspot_distributions_run() {
        for d in [RequestDistribution::Uniform, RequestDistribution::Hotspot] {
            let mut cfg = YcsbConfig::new(YcsbWorkload::B, 200);
            cfg.distribution = d;
            cfg.field_length_distribution = FieldLengthDistribution::Uniform;
            let store = loaded(&cfg);
            let r = run_ops(&store, &cfg, 500);
            assert_eq!(r.op("READ").unwrap().not_found, 0);
        }
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let mut c = YcsbConfig::new(YcsbWorkload::A, 0);
        assert!(c.validate().unwrap_err().to_string().contains("--records"));
        c.record_count = 10;
        c.field_length = 0;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--field-length"));
        c.field_length = 1 << 30;
        assert!(c.validate().unwrap_err().to_string().contains("MiB"));
        assert!("g".parse::<YcsbWorkload>().is_err());
        assert!("zipf".parse::<RequestDistribution>().is_err());
        let store = MemStore::new();
        assert!(matches!(
            load(&store, &YcsbConfig::new(YcsbWorkload::A, 0), 1, 1, None),
            Err(WorkloadError::Config(_))
        ));
        assert!(store.table_names().is_empty(), "no work before validation");
        store.create_table("usertable").unwrap();
        let e = run(
            &store,
            &YcsbConfig::new(YcsbWorkload::A, 10),
            &DriverConfig::default(),
            None,
        );
        assert!(matches!(e, Err(WorkloadError::NotLoaded { .. })), "{e:?}");
    }
}

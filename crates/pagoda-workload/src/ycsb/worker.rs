//! The run phase's clients: the state shared by a run (operation mix, insert counter, field
//! lengths) and each thread's worker, which chooses keys and runs the operations.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::config::{RequestDistribution, YcsbConfig};
use super::record::{decode_record, encode_record, FieldLengths};
use crate::dist::{AckCounter, Hotspot, Latest, ScrambledZipfian};
use crate::driver::{
    DriverConfig, Finish, OpStatus, RunLimit, Submitted, TxnRunner, Worker, Workload,
};
use crate::store::{Store, StoreError};

/// Operation names as YCSB prints them, in report order.
pub const OP_NAMES: [&str; 5] = ["READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"];
const READ: usize = 0;
const UPDATE: usize = 1;
const INSERT: usize = 2;
const SCAN: usize = 3;
const RMW: usize = 4;

/// Shared state of a YCSB run.
#[derive(Debug)]
pub(super) struct YcsbRun<'a> {
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
    pub(super) fn new(cfg: &'a YcsbConfig, d: &DriverConfig) -> Self {
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
            let table_t = t.open(&cfg.table)?;
            Ok(Finish::Commit(match t.get(table_t, &key)? {
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
            let table_t = t.open(&cfg.table)?;
            if cfg.field_count == 1 && !read_first {
                // The field is the whole value: a blind write, as a KV binding does.
                t.put(table_t, &key, &new_value)?;
                return Ok(Finish::Commit(OpStatus::Ok));
            }
            let Some(old) = t.get(table_t, &key)? else {
                return Ok(Finish::Rollback(OpStatus::NotFound));
            };
            let mut fields = decode_record(&old, cfg.field_count)?;
            fields[field].clone_from(&new_value);
            t.put(table_t, &key, &encode_record(&fields))?;
            Ok(Finish::Commit(OpStatus::Ok))
        })
    }

    fn insert(&mut self, store: &dyn Store, txns: &mut TxnRunner) -> Result<OpStatus, StoreError> {
        let cfg = self.run.cfg;
        let keynum = self.run.inserts.next();
        let key = cfg.key(keynum);
        let value = encode_record(&self.run.lengths.record(&mut self.rng, cfg.field_count));
        let r = txns.run(store, false, |t| {
            let table_t = t.open(&cfg.table)?;
            t.put(table_t, &key, &value)?;
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
            let table_t = t.open(&cfg.table)?;
            let rows = t.scan(table_t, &key, None, len, false)?;
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
                let table_t = t.open(&cfg.table)?;
                t.put(table_t, &key, &new_value)?;
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
    use crate::report::{render_text, render_ycsb, RunReport};
    use crate::store::{MemStore, StoreTxn};
    use crate::ycsb::{load, run, FieldLengthDistribution, InsertOrder, YcsbWorkload};

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
    fn workload_a_mix_and_record_shape() {
        let cfg = YcsbConfig::new(YcsbWorkload::A, 1000);
        let store = loaded(&cfg);
        {
            let mut t = store.begin_read().unwrap();
            let usertable_t = t.open("usertable").unwrap();
            let v = t.get(usertable_t, &cfg.key(5)).unwrap().unwrap();
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
        fn open(&mut self, t: &str) -> Result<crate::store::TableId, StoreError> {
            self.0.open(t)
        }
        fn get(
            &mut self,
            t: crate::store::TableId,
            k: &[u8],
        ) -> Result<Option<Vec<u8>>, StoreError> {
            self.0.get(t, k)
        }
        fn put(&mut self, t: crate::store::TableId, k: &[u8], v: &[u8]) -> Result<(), StoreError> {
            self.0.put(t, k, v)
        }
        fn delete(&mut self, t: crate::store::TableId, k: &[u8]) -> Result<bool, StoreError> {
            self.0.delete(t, k)
        }
        fn scan(
            &mut self,
            t: crate::store::TableId,
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
        let mut cfg = YcsbConfig::new(YcsbWorkload::UpdateOnly, 200);
        // The WiredTiger paper's 20-byte keys (loaded through the bulk path: ordered keys).
        cfg.insert_order = InsertOrder::Ordered;
        cfg.zero_padding = 16;
        let store = loaded(&cfg);
        let r = run_ops(&store, &cfg, 1000);
        assert_eq!(r.op("UPDATE").unwrap().count, 1000);
        let mut t = store.begin_read().unwrap();
        let usertable_t = t.open("usertable").unwrap();
        let rows = t.scan(usertable_t, b"", None, usize::MAX, false).unwrap();
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
}

//! YCSB core workloads A–F and the update-only workload of the WiredTiger (pipelined commit)
//! paper.
//!
//! Record encoding (one value per key): with one field the value is the field's bytes as they
//! are (so update-only's value is exactly 1 KiB); with several, the fields `field0..` follow
//! each other in order, each as a 4-byte little-endian length and its bytes. Field names are
//! implied by position.

pub(crate) mod config;
pub(crate) mod record;
#[cfg(test)]
mod report_tests;
mod sorted;
pub(crate) mod worker;

use rand::rngs::SmallRng;
use rand::SeedableRng;

pub use config::{
    FieldLengthDistribution, InsertOrder, Proportions, RequestDistribution, YcsbConfig,
    YcsbWorkload, MAX_RECORD_BYTES,
};
pub use record::{decode_record, encode_record};
pub use worker::OP_NAMES;

use crate::driver::{self, DriverConfig, Finish, LoadReport, ProgressFn, TxnRunner};
use crate::error::WorkloadError;
use crate::report::RunReport;
use crate::store::Store;
use record::FieldLengths;
use worker::YcsbRun;

/// Loads `cfg.record_count` records with `threads` loader threads (each transaction inserts
/// `cfg.load_batch` records). Creates the table. With [`InsertOrder::Ordered`] the records go
/// to [`Store::bulk_load`] instead, in ascending key order on one thread (the table must be
/// empty): the engine's own path for sorted input.
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
    if cfg.insert_order == InsertOrder::Ordered {
        // Keys in order: the engine's bulk path, one stream (as db_bench's fillseq).
        return sorted::load(store, cfg, seed, progress);
    }
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
            let table_t = t.open(&cfg.table)?;
            for (k, v) in &rows {
                t.put(table_t, k, v)?;
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
    let table_t = t.open(&cfg.table).map_err(err)?;
    for k in [0, cfg.record_count - 1] {
        if t.get(table_t, &cfg.key(k)).map_err(err)?.is_none() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

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

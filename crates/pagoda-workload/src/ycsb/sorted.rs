//! The load of an ordered key space: the records go to [`Store::bulk_load`] in ascending key
//! order, one stream, so an engine with a bulk path (bottom-up leaves, append mode, file
//! ingestion) builds the table once instead of inserting it transaction by transaction.

use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::time::Instant;

use super::record::{encode_record, FieldLengths};
use super::YcsbConfig;
use crate::driver::{self, LoadReport, Progress, ProgressFn};
use crate::error::WorkloadError;
use crate::store::Store;

/// Key numbers in ascending key order: the numbers themselves when the zero padding gives
/// every number the same width, else sorted by key ("user10" sorts before "user2").
fn key_order(cfg: &YcsbConfig) -> Vec<u64> {
    let mut nums: Vec<u64> = (0..cfg.record_count).collect();
    let width = (cfg.record_count - 1).max(1).ilog10() as usize + 1;
    if cfg.zero_padding < width {
        nums.sort_by_cached_key(|&k| cfg.key(k));
    }
    nums
}

/// Loads the records with one [`Store::bulk_load`] in ascending key order (the table must be
/// empty). Values come from one stream seeded by `seed`.
pub(crate) fn load(
    store: &dyn Store,
    cfg: &YcsbConfig,
    seed: u64,
    progress: Option<ProgressFn<'_>>,
) -> Result<LoadReport, WorkloadError> {
    let start = Instant::now();
    let order = key_order(cfg);
    let lengths = FieldLengths::new(cfg);
    let mut rng = SmallRng::seed_from_u64(driver::thread_seed(seed, 0));
    let batch = cfg.load_batch as u64;
    let units = cfg.record_count.div_ceil(batch);
    let mut rows = order.iter().enumerate().map(|(i, &k)| {
        let i = i as u64;
        if let Some(p) = progress {
            if i.is_multiple_of(batch) {
                p(Progress {
                    done: i / batch,
                    total: Some(units),
                    elapsed: start.elapsed(),
                    planned: None,
                    warming_up: false,
                });
            }
        }
        let fields = lengths.record(&mut rng, cfg.field_count);
        (cfg.key(k), encode_record(&fields))
    });
    let n = store
        .bulk_load(&cfg.table, &mut rows)
        .map_err(|e| WorkloadError::store("bulk-loading the YCSB records in key order", e))?;
    let duration_s = start.elapsed().as_secs_f64();
    Ok(LoadReport {
        workload: "ycsb".to_string(),
        rows: n,
        duration_s,
        rows_per_s: if duration_s > 0.0 {
            n as f64 / duration_s
        } else {
            0.0
        },
        conflicts: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::{InsertOrder, YcsbWorkload};

    #[test]
    fn keys_come_in_ascending_order_whatever_the_padding() {
        for padding in [1, 3, 16] {
            let mut cfg = YcsbConfig::new(YcsbWorkload::A, 1234);
            cfg.insert_order = InsertOrder::Ordered;
            cfg.zero_padding = padding;
            let keys: Vec<Vec<u8>> = key_order(&cfg).into_iter().map(|k| cfg.key(k)).collect();
            assert_eq!(keys.len(), 1234);
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "padding {padding}");
        }
    }
}

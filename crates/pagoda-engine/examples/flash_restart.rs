//! Restart figures of the FaCE flash cache: recovery time after a power cut with and
//! without a flash cache (and how much of it was the directory rebuild), then, after a clean
//! close, the open time and the hit ratios of the first reads with the cache warm, cold, and
//! without one. Data on an emulated 15k-RPM disk, log and flash cache on emulated SATA SSDs,
//! latency emulated.
//!
//! `cargo run --release -p pagoda-engine --example flash_restart [RECORDS] [READS]`

use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, FlashCacheOptions, TornMode};
use rand::{Rng, SeedableRng};
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn dev(spec: &str) -> Res<DeviceRef> {
    Ok(DeviceSpec::parse(spec)?.open()?)
}

fn key(i: u64) -> Vec<u8> {
    format!("user{i:010}").into_bytes()
}

struct Setup {
    data: DeviceRef,
    log: DeviceRef,
    flash: Option<DeviceRef>,
}

impl Setup {
    fn new(with_flash: bool) -> Res<Self> {
        Ok(Self {
            data: dev("hdd-15k,capacity=2GiB,latency=emulate")?,
            log: dev("sata-ssd,capacity=1GiB,latency=emulate")?,
            flash: if with_flash {
                Some(dev("sata-ssd,capacity=4GiB,latency=emulate")?)
            } else {
                None
            },
        })
    }

    fn opts(&self, flash: Option<&DeviceRef>) -> DbOptions {
        // No background thread: no checkpoint but the explicit one, so both runs crash with the
        // same log to replay.
        let o = DbOptions::with_devices(self.data.clone(), self.log.clone())
            .buffer_bytes(4 << 20)
            .background(false)
            .torn(if self.flash.is_some() {
                TornMode::None
            } else {
                TornMode::Doublewrite
            });
        match flash {
            Some(f) => o.flash_cache(FlashCacheOptions::new(f.clone()).size_bytes(24 << 20)),
            None => o,
        }
    }

    fn cut(&self) -> Res<()> {
        let mut devs = vec![&self.data, &self.log];
        devs.extend(self.flash.as_ref());
        for (i, d) in devs.into_iter().enumerate() {
            d.as_power_cut()
                .ok_or("emulated devices cut power")?
                .power_cut(7 + i as u64)?;
        }
        Ok(())
    }
}

/// Loads `records`, checkpoints, then updates for a while (the log since the checkpoint is
/// what recovery replays).
fn fill(db: &Db, records: u64) -> Res<()> {
    db.create_table("t")?;
    let val = vec![b'v'; 1000];
    for chunk in (0..records).collect::<Vec<_>>().chunks(200) {
        let tx = db.begin_write()?;
        for &i in chunk {
            tx.open_table("t")?.put(&key(i), &val)?;
        }
        tx.commit()?;
    }
    db.checkpoint()?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    for _ in 0..records / 40 {
        let tx = db.begin_write()?;
        for _ in 0..20 {
            let i = rng.gen_range(0..records);
            tx.open_table("t")?.put(&key(i), &val)?;
        }
        tx.commit()?;
    }
    Ok(())
}

/// Reads `n` random keys; returns (ops/s, DRAM hit ratio, flash hit ratio).
fn reads(db: &Db, records: u64, n: u64) -> Res<(f64, f64, Option<f64>)> {
    let before = db.stats();
    let f0 = before.flash_cache.as_ref().map(|f| (f.hits, f.misses));
    let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
    let t0 = Instant::now();
    for _ in 0..n {
        let tx = db.begin_read()?;
        let i = rng.gen_range(0..records);
        if tx.open_table("t")?.get(&key(i))?.is_none() {
            return Err(format!("key {i} missing").into());
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let s = db.stats();
    let hits = s.buffer.hits - before.buffer.hits;
    let misses = s.buffer.misses - before.buffer.misses;
    let flash = match (f0, &s.flash_cache) {
        (Some((h0, m0)), Some(f)) => {
            let (h, m) = (f.hits - h0, f.misses - m0);
            Some(h as f64 / (h + m).max(1) as f64)
        }
        _ => None,
    };
    Ok((
        n as f64 / secs,
        hits as f64 / (hits + misses).max(1) as f64,
        flash,
    ))
}

fn main() -> Res<()> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let records = args.first().copied().unwrap_or(60_000);
    let n = args.get(1).copied().unwrap_or(3_000);
    println!("records {records} x 1000 B, buffer 4 MiB, flash cache 24 MiB (face, dirty pages), data hdd-15k, log and cache sata-ssd, latency emulated\n");
    println!("| after a power cut | recovery ms | of which flash rebuild ms | records replayed | pages read from the data device |");
    println!("|---|---|---|---|---|");
    let mut kept = None;
    for with_flash in [false, true] {
        let s = Setup::new(with_flash)?;
        let db = Db::open(s.opts(s.flash.as_ref()))?;
        fill(&db, records)?;
        db.abandon();
        s.cut()?;
        let db = Db::open(s.opts(s.flash.as_ref()))?;
        let st = db.stats();
        let rebuild = st.flash_cache.as_ref().map_or(0.0, |f| f.rebuild_ms);
        println!(
            "| {} | {:.0} | {:.1} | {} | {} |",
            if with_flash {
                "flash cache (torn none)"
            } else {
                "no flash cache (doublewrite)"
            },
            st.recovery.duration_ms,
            rebuild,
            st.recovery.records_replayed,
            st.recovery.pages_read
        );
        db.close()?;
        if with_flash {
            kept = Some(s);
        }
    }
    let s = kept.ok_or("setup")?;
    println!("\n| after a clean close | open ms | flash rebuild ms | first {n} reads: ops/s | DRAM hit ratio | flash hit ratio (of DRAM misses) |");
    println!("|---|---|---|---|---|---|");
    let cold_dev = dev("sata-ssd,capacity=4GiB,latency=emulate")?;
    for (name, flash) in [
        ("flash cache warm", s.flash.clone()),
        ("flash cache cold (new device)", Some(cold_dev)),
        ("no flash cache", None),
    ] {
        let t0 = Instant::now();
        let db = Db::open(s.opts(flash.as_ref()))?;
        let open_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let rebuild = db.stats().flash_cache.map(|f| f.rebuild_ms);
        let (ops, dram, fl) = reads(&db, records, n)?;
        println!(
            "| {name} | {open_ms:.0} | {} | {ops:.0} | {dram:.3} | {} |",
            rebuild.map_or("–".into(), |r| format!("{r:.1}")),
            fl.map_or("–".into(), |f| format!("{f:.3}"))
        );
        db.close()?;
    }
    Ok(())
}

//! Block layout: how `capacity` and `op` become erase blocks and write points.
//!
//! Capacity never removes parallel units (PUs) or write points: a smaller device has fewer
//! blocks on each PU, and every stream keeps one host write point per PU (unless `stripe`
//! asks for fewer). Each write point holds an open block, and open blocks may use at most half
//! of the spare blocks (the other half guarantees GC a victim with invalid units), so the
//! device needs enough spare *blocks*.
//!
//! The presets lay out one block size at every capacity: the largest with which
//! [`REFERENCE_CAPACITY`] has those spare blocks (`preset_block_pages`). The block's unit
//! count sets greedy GC's WAF and how long one victim's copybacks hold its PU, so a block that
//! grew with capacity made full devices of different capacities differ (2.02x in IOPS, see
//! `docs/devices.md`). Below the reference capacity, or with an explicit `pages_per_block`
//! too large for the capacity, pages per block are halved until the spare blocks suffice,
//! down to [`MIN_PAGES_PER_BLOCK`]. An erase is charged the block's share of the drive's
//! tBERS, so erase time per byte stays the drive's.

use super::config::{Geometry, SsdConfig, UNIT};
use crate::error::{DeviceError, Result};
use crate::units::format_size;

/// Smallest block the scaling makes (an explicit smaller `pages_per_block` is kept): a block
/// several pages deep keeps GC's victim choice meaningful and the per-block tables small.
pub const MIN_PAGES_PER_BLOCK: u32 = 4;

/// The smallest capacity the reproductions run an emulated SSD at: the presets' block is
/// the largest that still keeps every write point there.
pub const REFERENCE_CAPACITY: u64 = 512 << 20;

/// Pages per block a preset lays out at every capacity: the drive's block, halved until
/// [`REFERENCE_CAPACITY`] keeps every write point with the preset's op, streams and stripe.
pub(crate) fn preset_block_pages(drive: &SsdConfig) -> Result<u32> {
    let at_reference = SsdConfig {
        capacity_bytes: REFERENCE_CAPACITY,
        block_pages: None,
        ..drive.clone()
    };
    Ok(at_reference.geometry()?.pages_per_block)
}

/// Block counts of one candidate block size.
struct Fit {
    blocks: u64,
    data_blocks: u64,
    /// Widest stripe the spare blocks allow (0 = not even one write point per stream).
    max_stripe: u64,
}

fn fit(logical_units: u64, op: f64, units_per_block: u32, streams: u64, reserve: u64) -> Fit {
    let upb = u64::from(units_per_block);
    let blocks = ((logical_units as f64 * (1.0 + op)).ceil() as u64).div_ceil(upb);
    let data_blocks = logical_units.div_ceil(upb);
    let spare = blocks - data_blocks;
    // Open blocks (stripe write points + 1 block of GC headroom per stream) may use at most
    // half of the spare blocks: the other half guarantees GC always finds a victim with
    // invalid units, so it can never deadlock.
    let budget = (spare / 2).saturating_sub(reserve);
    Fit {
        blocks,
        data_blocks,
        max_stripe: (budget / streams).saturating_sub(1),
    }
}

/// Spare blocks `stripe` write points per stream need (inverse of [`fit`]'s budget).
fn spare_needed(stripe: u64, streams: u64, reserve: u64) -> u64 {
    2 * (streams * (stripe + 1) + reserve)
}

/// Validates capacity/op against the geometry and derives the block layout.
pub(crate) fn derive(c: &SsdConfig, units_per_page: u32) -> Result<Geometry> {
    let cfg = |m: String| Err(DeviceError::config(m));
    let logical_units = c.capacity_bytes / UNIT;
    let pus = c.channels * c.dies_per_channel * c.planes;
    let streams = u64::from(c.write_point_streams());
    let reserve = u64::from(c.gc_high_blocks);
    let stripe = match c.stripe {
        Some(s) if s == 0 || s > pus => {
            return cfg(format!(
                "stripe={s} is out of range: this geometry allows 1..={pus} (one write point \
                 per parallel unit: {} channels x {} dies x {} planes)",
                c.channels, c.dies_per_channel, c.planes
            ))
        }
        Some(s) => s,
        None => pus,
    };
    let mut ppb = c.block_pages.unwrap_or(c.pages_per_block);
    let floor = MIN_PAGES_PER_BLOCK.min(ppb);
    let (f, units_per_block) = loop {
        let upb = ppb * units_per_page;
        let f = fit(logical_units, c.op, upb, streams, reserve);
        let total_units = f.blocks * u64::from(upb);
        if total_units >= u64::from(u32::MAX) || logical_units >= u64::from(u32::MAX) {
            return cfg(format!(
                "capacity={} with op={} needs {total_units} mapping units; at most {} are \
                 supported (about 16 TiB); lower capacity",
                format_size(c.capacity_bytes),
                c.op,
                u32::MAX - 1
            ));
        }
        // Once the spare blocks hold the write points (at least 10 blocks), rounding to whole
        // blocks adds less than op/9 to op, so no separate rounding check is needed.
        if f.blocks >= u64::from(pus) && f.max_stripe >= u64::from(stripe) {
            break (f, upb);
        }
        if ppb / 2 < floor {
            return Err(too_small(c, units_per_page * floor, pus, stripe));
        }
        ppb /= 2;
    };
    Ok(Geometry {
        units_per_page,
        units_per_block,
        pages_per_block: ppb,
        drive_pages_per_block: c.pages_per_block,
        blocks: f.blocks as u32,
        logical_units: logical_units as u32,
        pus,
        channels: c.channels,
        planes_per_channel: c.dies_per_channel * c.planes,
        stripe,
        cache_units: (c.cache_bytes / UNIT).min(u64::from(u32::MAX)) as u32,
        volatile_cache: c.cache_bytes > 0 && !c.plp,
    })
}

/// The error for a capacity whose spare blocks cannot hold every write point even with the
/// smallest blocks (`upb` units each): names the smallest capacity that can, and the op that
/// would do at this capacity.
fn too_small(c: &SsdConfig, upb: u32, pus: u32, stripe: u32) -> DeviceError {
    let streams = u64::from(c.write_point_streams());
    let reserve = u64::from(c.gc_high_blocks);
    let need = spare_needed(u64::from(stripe), streams, reserve);
    let logical_units = c.capacity_bytes / UNIT;
    let here = fit(logical_units, c.op, upb, streams, reserve);
    let need_blocks = (here.data_blocks + need).max(u64::from(pus));
    let need_op = (need_blocks * u64::from(upb)) as f64 / logical_units as f64 - 1.0;
    let block_bytes = u64::from(upb) * UNIT;
    let reason = format!(
        "{stripe} write point(s) per stream (one per parallel unit: {} channels x {} dies x \
         {} planes) for {streams} stream(s) need {need} spare blocks with gc_high={reserve}, \
         and {pus} parallel units need at least {pus} blocks; with the smallest blocks \
         ({} of {}) op={} gives {} blocks of which {} are spare",
        c.channels,
        c.dies_per_channel,
        c.planes,
        upb / (c.page_size_bytes as u32 / UNIT as u32).max(1),
        format_size(c.page_size_bytes as u64),
        c.op,
        here.blocks,
        here.blocks - here.data_blocks,
    );
    let fix = format!("raise op to {need_op:.3}, or lower streams/stripe");
    // Smallest capacity (whole smallest blocks) whose layout fits; none if op leaves no spare.
    let max_data = u64::from(u32::MAX - 1) / u64::from(upb) / 2;
    let min_data = if c.op > 0.0 {
        // ⌈d·op⌉ spare blocks reach `need` once d·op > need − 1: start just below that.
        let start = (((need - 1) as f64 / c.op) as u64)
            .saturating_sub(2)
            .max(u64::from(pus).saturating_sub(need))
            .max(1);
        (start..=max_data.max(start))
            .take(u64::from(pus) as usize + 64)
            .find(|&d| {
                let f = fit(d * u64::from(upb), c.op, upb, streams, reserve);
                f.blocks >= u64::from(pus) && f.max_stripe >= u64::from(stripe)
            })
            .filter(|&d| d <= max_data)
    } else {
        None
    };
    match min_data {
        Some(d) => DeviceError::CapacityTooSmall {
            capacity: c.capacity_bytes,
            min_capacity: d * block_bytes,
            reason,
            fix,
        },
        None => DeviceError::config(format!(
            "capacity={} op={}: {reason}; no capacity is large enough at this op: {fix}",
            format_size(c.capacity_bytes),
            c.op
        )),
    }
}

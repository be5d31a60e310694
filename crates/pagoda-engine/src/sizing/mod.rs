//! Buffer-pool sizing (miss-ratio curve and throughput model): what a buffer of any size would have
//! done for a recorded run, and which buys more, a bigger buffer or a faster device.
//!
//! 1. [`crate::Db::start_page_trace`] / [`crate::Db::take_page_trace`] record the pool's page
//!    references into a [`PageTrace`] (`trace.rs`, SHARDS-sampled at a [`ShardsRate`]).
//! 2. [`Mrc::from_trace`] turns it into the hit ratio of an LRU cache of every size (`mrc.rs`).
//! 3. [`Advice`] combines the curve with the run's [`Measured`] figures and each device's
//!    [`DeviceFigures`] in a throughput model (`model.rs`): predicted TPS per size and device,
//!    the knee, and the advice in words. `pagoda advise buffer` is this plus a YCSB run and a
//!    device probe.

mod model;
mod mrc;
mod trace;

pub use model::{extent_pages, Advice, DeviceFigures, Measured, KNEE_GAIN, MIN_PAGES, POINTS};
pub use mrc::{Mrc, PageTrace, ShardsRate};
pub(crate) use trace::Recorder;

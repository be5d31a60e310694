//! A power rail: devices that lose power together.

use crate::{DeviceError, DeviceRef, Result};
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// Devices that lose power together (a database's data and log devices): a cut armed on the
/// rail falls at the n-th write, flush or trim over all of them and cuts each at once (every
/// wrapped device must emulate a power cut); from then on their requests fail until
/// [`Rail::power_on`]. A request runs wholly before the cut or fails.
#[derive(Debug)]
pub struct Rail {
    pub(super) devices: Mutex<Vec<DeviceRef>>,
    seed: u64,
    /// Counted requests left before the cut; `i64::MAX` while disarmed.
    left: AtomicI64,
    off: AtomicBool,
    /// Requests hold it shared, the cut exclusively.
    gate: RwLock<()>,
}

impl Rail {
    /// A rail whose cut decides with `seed` (and the device's place on the rail) which unflushed
    /// sectors survive.
    pub fn new(seed: u64) -> Arc<Self> {
        Arc::new(Self {
            devices: Mutex::new(Vec::new()),
            seed,
            left: AtomicI64::new(i64::MAX),
            off: AtomicBool::new(false),
            gate: RwLock::new(()),
        })
    }

    /// Cuts the power at the `n`-th write, flush or trim from now (that request fails).
    pub fn arm(&self, n: u64) {
        self.left.store(
            i64::try_from(n.max(1)).unwrap_or(i64::MAX),
            Ordering::Release,
        );
    }

    /// Whether the power is off.
    pub fn is_off(&self) -> bool {
        self.off.load(Ordering::Acquire)
    }

    /// Cuts the power of every device on the rail now (nothing if it is off already).
    pub fn cut(&self) -> Result<()> {
        let _g = self.gate.write();
        if self.off.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        for (i, d) in self.devices.lock().iter().enumerate() {
            if let Some(pc) = d.as_power_cut() {
                pc.power_cut(self.seed.wrapping_add(i as u64))?;
            }
        }
        Ok(())
    }

    /// Powers the rail on again, disarmed.
    pub fn power_on(&self) {
        self.left.store(i64::MAX, Ordering::Release);
        self.off.store(false, Ordering::Release);
    }

    fn power_off() -> DeviceError {
        DeviceError::io(
            "emulated power cut",
            std::io::Error::other("the device has no power"),
        )
    }

    /// Runs one request; `counts` for writes, flushes and trims.
    pub(super) fn run<T>(&self, counts: bool, f: impl FnOnce() -> Result<T>) -> Result<T> {
        {
            let _g = self.gate.read();
            if self.is_off() {
                return Err(Self::power_off());
            }
            if !counts || self.left.fetch_sub(1, Ordering::AcqRel) > 1 {
                return f();
            }
        }
        self.cut()?;
        Err(Self::power_off())
    }
}

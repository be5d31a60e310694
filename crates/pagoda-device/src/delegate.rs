//! One delegation for devices that wrap another: a wrapper states only what it changes.
//!
//! A wrapper (a trace, a queue, a page cache, a partition, a fault injector, an image file, a
//! power switch) implements [`DelegateDevice`]: it names its [`inner`](DelegateDevice::inner)
//! device and overrides the methods whose behaviour it changes. Every other method of
//! [`BlockDevice`] forwards to the inner device, through the blanket
//! `impl<T: DelegateDevice> BlockDevice for T`, so a wrapper cannot forget one (the counters,
//! the timing switch and the power-cut interface included), and a method added to
//! [`BlockDevice`] reaches every wrapper at once.
//!
//! Implement it by path (`impl pagoda_device::DelegateDevice for MyWrapper`) rather than
//! importing the trait: its methods share [`BlockDevice`]'s names, so with both traits in scope
//! a call such as `wrapper.caps()` on the concrete type is ambiguous. Inside the impl itself
//! the trait is in scope all the same: there, call the wrapper's own methods by path
//! (`BlockDevice::caps(self)`), or the inner device's through [`inner`](DelegateDevice::inner).
//!
//! ```
//! use pagoda_device::{BlockDevice, DeviceRef};
//!
//! /// Renames a device and forwards everything else.
//! #[derive(Debug)]
//! struct Renamed(DeviceRef);
//!
//! impl pagoda_device::DelegateDevice for Renamed {
//!     fn inner(&self) -> &dyn BlockDevice {
//!         &*self.0
//!     }
//!     fn describe(&self) -> String {
//!         format!("renamed({})", self.0.describe())
//!     }
//! }
//! ```

use crate::error::Result;
use crate::stats::DeviceStats;
use crate::{BlockDevice, Capabilities, PowerCut, WriteHints};

/// A device that wraps another: every method forwards to [`inner`](Self::inner) unless
/// overridden. The blanket implementation makes each such type a [`BlockDevice`]. The methods
/// mirror [`BlockDevice`]'s (see there for their contracts).
pub trait DelegateDevice: Send + Sync + std::fmt::Debug {
    /// The wrapped device, where whatever this wrapper does not change goes.
    fn inner(&self) -> &dyn BlockDevice;

    /// [`BlockDevice::caps`]; forwards by default.
    fn caps(&self) -> Capabilities {
        self.inner().caps()
    }
    /// [`BlockDevice::read`]; forwards by default.
    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        self.inner().read(sector, buf)
    }
    /// [`BlockDevice::write`]; forwards by default.
    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        self.inner().write(sector, buf, hints)
    }
    /// [`BlockDevice::flush`]; forwards by default.
    fn flush(&self) -> Result<()> {
        self.inner().flush()
    }
    /// [`BlockDevice::trim`]; forwards by default.
    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        self.inner().trim(sector, sectors)
    }
    /// [`BlockDevice::stats`]; forwards by default.
    fn stats(&self) -> DeviceStats {
        self.inner().stats()
    }
    /// [`BlockDevice::reset_stats`]; forwards by default. An override that keeps counters of
    /// its own must still reset the inner device's.
    fn reset_stats(&self) {
        self.inner().reset_stats();
    }
    /// [`BlockDevice::pause_timing`]; forwards by default.
    fn pause_timing(&self, paused: bool) {
        self.inner().pause_timing(paused);
    }
    /// [`BlockDevice::describe`]; forwards by default (the wrapper is invisible in reports).
    fn describe(&self) -> String {
        self.inner().describe()
    }
    /// [`BlockDevice::as_power_cut`]; forwards by default: a cut goes straight to the inner
    /// device. Override it when the wrapper holds state a cut must reach.
    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        self.inner().as_power_cut()
    }
}

impl<T: DelegateDevice> BlockDevice for T {
    fn caps(&self) -> Capabilities {
        DelegateDevice::caps(self)
    }
    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        DelegateDevice::read(self, sector, buf)
    }
    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        DelegateDevice::write(self, sector, buf, hints)
    }
    fn flush(&self) -> Result<()> {
        DelegateDevice::flush(self)
    }
    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        DelegateDevice::trim(self, sector, sectors)
    }
    fn stats(&self) -> DeviceStats {
        DelegateDevice::stats(self)
    }
    fn reset_stats(&self) {
        DelegateDevice::reset_stats(self);
    }
    fn pause_timing(&self, paused: bool) {
        DelegateDevice::pause_timing(self, paused);
    }
    fn describe(&self) -> String {
        DelegateDevice::describe(self)
    }
    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        DelegateDevice::as_power_cut(self)
    }
}

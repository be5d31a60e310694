//! 16 KiB atomic page writes (torn mode `atomic`): the 16 KiB atomic-write paper's replacement
//! for the double-write buffer. Each page is one write the device keeps whole or not at all, so
//! no page is torn and none is copied first.
//!
//! The engine's part is this file and the check at open that the data device's atomic-write
//! unit is the page size (`db/devices.rs`, `check_atomic_unit`). The device's part is
//! [`WriteHints::atomic`] and how each device honours it (`pagoda-device`): the emulated SSD
//! marks an atomic write's units as one group in their out-of-band metadata and recovers a
//! group only whole (`ssd/spor.rs`), the I/O queue never merges an atomic write with a normal
//! one (`sched.rs`), and a real file takes one `RWF_ATOMIC` write per page (`file/`).

use crate::buffer::cleaner::Out;
use crate::buffer::Pool;
use crate::error::Result;
use crate::probe::{self, Sabotage};
use pagoda_device::WriteHints;

impl Pool {
    /// Writes each page of a batch as one atomic write on the data stream (`data` are the
    /// plain hints, used only by the sabotage that drops atomicity).
    pub(super) fn write_atomic(&self, outs: &[Out], data: WriteHints) -> Result<()> {
        let hints = if probe::is(self.sabotage, Sabotage::NonAtomicPages) {
            data
        } else {
            WriteHints::atomic(self.data_stream)
        };
        for o in outs {
            self.dev.write(self.sector_of(o.pid), &o.bytes, hints)?;
        }
        Ok(())
    }
}

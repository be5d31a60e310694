//! The engine's named write streams (the DWB-FTL paper's stream separation): the FTL keeps each
//! stream in its own flash blocks, so data of different lifetimes (the log ring, pages, the
//! double-write area, the flash cache ring) is not mixed in one erase block and garbage collection
//! copies less.

use pagoda_device::Capabilities;

/// A write stream of the engine. Stream 0 is the device's default and is not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    /// The write-ahead log ring.
    Log,
    /// Data pages written in place.
    Data,
    /// The double-write area (short-lived copies, overwritten every cleaner batch).
    Doublewrite,
    /// The FaCE flash cache's ring.
    FlashCache,
}

impl Stream {
    /// The stream id this stream asks for.
    pub const fn id(self) -> u16 {
        match self {
            Stream::Log => 1,
            Stream::Data => 2,
            Stream::Doublewrite => 3,
            Stream::FlashCache => 4,
        }
    }

    /// The id to use on a device with `caps`: a device with fewer streams folds the higher
    /// ones onto its last stream (one stream: everything on stream 0).
    pub fn on(self, caps: &Capabilities) -> u16 {
        self.id().min(caps.streams.saturating_sub(1))
    }
}

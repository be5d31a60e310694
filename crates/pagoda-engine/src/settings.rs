//! Settings fixed at creation that are not in the superblock: sector 2 of the data device (in
//! the reserved header) records the torn-write mode, so that a database is never recovered
//! with a mode other than the one its pages were written under (a double-write area that
//! recovery ignores, or torn pages that `none` cannot repair, would lose data). The two
//! double-write modes share a code: they differ only in which pages the cleaner copies, so a
//! database created in one opens in the other.

use crate::error::{Error, Result};
use crate::options::TornMode;
use pagoda_device::{DeviceRef, WriteHints};

/// Sector of the settings record.
pub(crate) const SETTINGS_SECTOR: u64 = 2;
const MAGIC: [u8; 8] = *b"PAGODAST";
const SECTOR: usize = pagoda_device::SECTOR_SIZE;

fn code(t: TornMode) -> u8 {
    match t.on_disk() {
        TornMode::Doublewrite | TornMode::DoublewriteFull => 1,
        TornMode::Atomic => 2,
        TornMode::None => 3,
    }
}

fn encode(t: TornMode) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.push(code(t));
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b.resize(SECTOR, 0);
    b
}

/// `Ok(None)`: no record (a database created before it existed, or a torn first write).
fn decode(buf: &[u8]) -> Result<Option<TornMode>> {
    if buf[..8] != MAGIC || crc32c::crc32c(&buf[..9]).to_le_bytes() != buf[9..13] {
        return Ok(None);
    }
    match buf[8] {
        1 => Ok(Some(TornMode::Doublewrite)),
        2 => Ok(Some(TornMode::Atomic)),
        3 => Ok(Some(TornMode::None)),
        c => Err(Error::corrupt(
            0,
            format!("settings record names torn mode {c}, which this build does not know"),
        )),
    }
}

/// Writes the record of a new database (not synced: the caller syncs before the superblock).
pub(crate) fn write(data: &DeviceRef, torn: TornMode, stream: u16) -> Result<()> {
    data.write(SETTINGS_SECTOR, &encode(torn), WriteHints::stream(stream))?;
    Ok(())
}

/// Refuses to open a database with another torn mode than it was created with; records the
/// mode of a database that has no record yet.
pub(crate) fn check(data: &DeviceRef, torn: TornMode, stream: u16) -> Result<()> {
    let mut buf = vec![0u8; SECTOR];
    data.read(SETTINGS_SECTOR, &mut buf)?;
    match decode(&buf)? {
        Some(t) if t == torn.on_disk() => Ok(()),
        Some(t) => {
            let how = if t == TornMode::Doublewrite {
                "--torn doublewrite or --torn doublewrite-full (TornMode::Doublewrite or \
                 DoublewriteFull)"
                    .to_string()
            } else {
                format!("--torn {t} (TornMode::{t:?})")
            };
            Err(Error::config(format!(
                "this database was created with torn mode {t} and is opened with torn mode \
                 {torn}: open it with {how}; a database keeps the mode it was created with"
            )))
        }
        None => {
            write(data, torn, stream)?;
            data.flush()?;
            Ok(())
        }
    }
}

//! The errors a cycle's workers meet, kept for the fault ledger: whether each reports
//! corruption (and of which pages) or carries an injected fault's tag.

use pagoda_engine::Error;

/// An error a worker met.
#[derive(Clone, Debug)]
pub(crate) struct Met {
    /// Detected corruption.
    pub corruption: bool,
    /// The pages a corruption report names.
    pub pages: Vec<u64>,
    /// The error's text.
    pub text: String,
}

impl Met {
    pub(crate) fn of(e: &Error) -> Self {
        Self {
            corruption: is_corruption(e),
            pages: corrupt_pages(e),
            text: e.to_string(),
        }
    }

    /// Whether the error carries an injected fault's tag.
    pub(crate) fn tagged(&self) -> bool {
        self.text.contains(TAG_START)
    }
}

/// How every tag of an injected error starts (see `pagoda_device::fault::FaultDevice::tag`).
pub(crate) const TAG_START: &str = "[fault ";

/// Whether `e` reports detected corruption.
pub(crate) fn is_corruption(e: &Error) -> bool {
    match e {
        Error::Failed(f) => is_corruption(f.cause()),
        e => e.is_corruption(),
    }
}

/// The pages a report of corruption names.
pub(crate) fn corrupt_pages(e: &Error) -> Vec<u64> {
    match e {
        Error::Failed(f) => corrupt_pages(f.cause()),
        Error::Corruption { all_pages, .. } => all_pages.clone(),
        _ => Vec::new(),
    }
}

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

/// Whether `text` carries the tag of an error that device `dev` injected with a number at or
/// above `first`: the error of that very fault, not one that happened to arrive.
pub(crate) fn carries_tag(text: &str, dev: &str, first: u64) -> bool {
    let start = format!("{TAG_START}{dev}#");
    text.match_indices(&start).any(|(at, _)| {
        let rest = &text[at + start.len()..];
        rest.split(']')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n >= first)
    })
}

#[cfg(test)]
mod tests {
    use super::carries_tag;

    #[test]
    fn a_tag_counts_only_for_its_device_and_from_its_first_number() {
        let t = "log write failed: injected I/O error [fault log#12]: Write of sector 3";
        assert!(carries_tag(t, "log", 12));
        assert!(carries_tag(t, "log", 0));
        assert!(!carries_tag(t, "log", 13), "an older fault's error");
        assert!(!carries_tag(t, "data", 0), "another device's error");
        assert!(!carries_tag("power is off (emulated power cut)", "log", 0));
        let two = "[fault data#1] then [fault data#7]";
        assert!(carries_tag(two, "data", 5));
        assert!(!carries_tag("[fault data#x]", "data", 0));
    }
}

//! Errors of the workload layer: bad configuration (found before any work starts) and failures
//! of the store during a load, a run or a check.

use crate::store::StoreError;

/// A configuration the workload cannot run; each message names the problem and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A count that must be positive is zero.
    #[error("{what} is 0; {fix}")]
    Zero {
        /// The option, e.g. `--warehouses`.
        what: &'static str,
        /// What to do instead.
        fix: &'static str,
    },
    /// A value outside the range the workload supports.
    #[error("{what} = {value} is out of range; {fix}")]
    OutOfRange {
        /// The option.
        what: &'static str,
        /// The value given.
        value: String,
        /// The accepted range and what to do.
        fix: String,
    },
    /// A request mix that cannot be used.
    #[error("bad mix: {0}")]
    Mix(String),
    /// A mix file that does not parse.
    #[error("mix file line {line}: {message}")]
    MixParse {
        /// 1-based line number.
        line: usize,
        /// What is wrong and how to write it.
        message: String,
    },
}

/// Why a load, run or check failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// Invalid configuration, detected before any work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store failed.
    #[error("store error during {during}: {source}")]
    Store {
        /// What the workload was doing.
        during: String,
        /// The store's error.
        source: StoreError,
    },
    /// The run phase found no loaded database.
    #[error("{what}; run the load phase first with the same parameters")]
    NotLoaded {
        /// What is missing.
        what: String,
    },
    /// A row read back from the store does not decode; the data is not what the loader wrote.
    #[error("corrupt row in table `{table}`: {detail}; reload the database")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What did not decode.
        detail: String,
    },
}

impl WorkloadError {
    /// Wraps a store error with the step that failed.
    pub fn store(during: impl Into<String>, source: StoreError) -> Self {
        WorkloadError::Store {
            during: during.into(),
            source,
        }
    }
}

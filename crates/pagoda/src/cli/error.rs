//! The CLI's error type: every failure ends as one line on stderr and a non-zero exit.

use std::path::PathBuf;

/// Result alias for commands.
pub type CliResult<T> = Result<T, CliError>;

/// Errors a command can end with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// From the device layer (bad device string, geometry, I/O).
    #[error(transparent)]
    Device(#[from] pagoda_device::DeviceError),
    /// A file the CLI reads or writes itself.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system reported.
        #[source]
        source: std::io::Error,
    },
    /// From the engine (bad options, corruption, I/O).
    #[error(transparent)]
    Engine(#[from] pagoda_engine::Error),
    /// From a workload (bad configuration, a database loaded with other parameters).
    #[error(transparent)]
    Workload(#[from] pagoda_workload::WorkloadError),
    /// A workload option that cannot run.
    #[error(transparent)]
    WorkloadConfig(#[from] pagoda_workload::ConfigError),
    /// A check that ran and failed (crashtest, inspect, bench --check); the report was
    /// printed already.
    #[error("{0}")]
    CheckFailed(String),
    /// A flag value that does not make sense.
    #[error("{0}")]
    Usage(String),
    /// Anything else, with its reason.
    #[error("{0}")]
    Other(String),
}

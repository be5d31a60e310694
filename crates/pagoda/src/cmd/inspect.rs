//! `pagoda inspect PATH`: verify a database's pages and log offline.

use crate::error::{CliError, CliResult};
use std::path::Path;

/// Inspects the database in `path`; fails naming the damaged pages.
pub fn run(path: &Path) -> CliResult<()> {
    if !path.is_dir() {
        return Err(CliError::Usage(format!(
            "{} is not a database directory (it should hold data.pagoda and log.pagoda)",
            path.display()
        )));
    }
    let report = pagoda_engine::inspect::inspect_dir(path)?;
    print!("{report}");
    if !report.is_ok() {
        let pages = report.corrupt_page_ids();
        let what = if pages.is_empty() {
            format!("log damaged: {}", report.log_problems.join("; "))
        } else {
            format!("corrupt pages {pages:?}")
        };
        return Err(CliError::CheckFailed(format!(
            "{}: {what}; restore from a backup or open with allow_corrupt to salvage the rest",
            path.display()
        )));
    }
    Ok(())
}

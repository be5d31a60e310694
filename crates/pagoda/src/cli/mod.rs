//! What the `pagoda` and `pagoda-crashtest` binaries share: the error type, progress bars,
//! JSON and table output, the provenance of published results, and the one-line usage error.
//! Not a stable API.

pub mod error;
pub mod flash;
pub mod progress;
pub mod provenance;
pub mod report;
pub mod units;

use std::process::ExitCode;

/// Help and version go to stdout as clap prints them; a real usage error becomes one line,
/// `PROGRAM: error: ...` as every other error, naming `program`'s help, and exit status 2.
pub fn usage_error(program: &str, e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.to_string();
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let mut first = lines
        .next()
        .unwrap_or("bad arguments")
        .trim_start_matches("error: ")
        .to_string();
    // "the following required arguments were not provided:" lists them on the lines below.
    if first.ends_with(':') {
        let listed: Vec<&str> = lines
            .take_while(|l| l.starts_with("  "))
            .map(str::trim)
            .collect();
        if !listed.is_empty() {
            first = format!("{first} {}", listed.join(", "));
        }
    }
    let tip = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("tip: "))
        .map(|t| format!("; {t}"))
        .unwrap_or_default();
    eprintln!("{program}: error: {first}{tip}; see `{program} --help` (or COMMAND --help)");
    ExitCode::from(2)
}

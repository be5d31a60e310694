//! `crashtest --publish FILE`: one row per run in a generated Markdown page
//! (`docs/results/crashtest.md`), so the published crash results come from the runs
//! themselves. The first run creates the page (what a row means, the machine); each later run
//! appends its row with its own date, commit and flags, and refuses a file that a crashtest did
//! not write. Runs with `--faults` go to their own page (`docs/results/crashtest-faults.md`),
//! one row per fault kind.

use pagoda::cli::error::{CliError, CliResult};
use pagoda_crashtest::CrashTestReport;
use std::io::Write;
use std::path::Path;

/// The first line of a page this module wrote; a file without it is never touched.
const TITLE: &str = "# Power-cut crash tests";
/// The first line of a page of runs with faults.
const FAULTS_TITLE: &str = "# Crash tests with faults";

/// The header of the page of runs with faults.
const FAULTS_HEADER: &str = "| date (UTC) | commit | flags | cycles | acknowledged commits | \
cuts during recovery | fault | injected | fired | detected | fired in recovery | reported at recovery | \
repaired | restored | checked | unverified | databases re-created | unreported | undetectable | \
wrong values | lost | verdict | fired/armed by target |\n\
|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n";

/// The title of the page a run's rows go to.
pub(super) fn title(faults: bool) -> &'static str {
    if faults {
        FAULTS_TITLE
    } else {
        TITLE
    }
}

/// The table's header; rows follow it to the end of the file.
const HEADER: &str = "| date (UTC) | commit | flags | cycles | acknowledged commits | \
transactions checked | unverified | cuts during recovery | cuts mid-checkpoint | torn pages repaired | \
corruption detected | lost | partial | uncommitted visible | isolation violations | verdict |\n\
|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";

/// What the run proved: a plain run passes when nothing the mode must prevent happened; a run
/// with a planted bug (`--sabotage`) is a proof of the checker only when that bug was caught.
pub(super) fn verdict(report: &CrashTestReport, failed: bool) -> &'static str {
    match (&report.sabotage, failed) {
        (None, false) => "pass",
        (None, true) => "FAILED",
        (Some(_), true) => "sabotage caught",
        (Some(_), false) => "sabotage NOT caught",
    }
}

/// The page's text before its first row: title, provenance of the first run, how to read it.
fn preamble() -> String {
    let machine = pagoda::cli::provenance::machine();
    format!(
        "{TITLE}\n\n{}Each row is one run of `pagoda crashtest ... --publish FILE`, appended by \
         that run: cycles of concurrent transactions on emulated devices, a power cut at a \
         random point (also during recovery), recovery, and the oracle's check of every \
         transaction (all or nothing; no acknowledged commit lost; every key shows its last \
         committed writer). `lost`, `partial`, `uncommitted visible` and `isolation \
         violations` must be 0 in a run that passes; `unverified` counts transactions of cycles whose \
         check stopped at a detected torn page (torn mode `none`). A run with `--sabotage` removes one \
         safety step on purpose; its row says whether the checker caught it.\n\n{HEADER}",
        pagoda::cli::provenance::provenance(&machine)
    )
}

/// The page of runs with faults, before its first row.
fn faults_preamble() -> String {
    let machine = pagoda::cli::provenance::machine();
    format!(
        "{FAULTS_TITLE}\n\n{}Each row is one fault kind of one run of `pagoda crashtest \
         --faults ... --publish FILE`, appended by that run: power-cut cycles as in the \
         power-cut page, and in a share of them one fault armed on the data, log or \
         flash-cache device (docs/failure-model.md says what each does and what the engine must do). `fired`: \
         cycles in which the fault acted; `detected`: cycles in which the fault's own report \
         arrived (an error carrying the failed request's tag reached a caller or the \
         database's failure; for damage, the check named for it reported that page; the power \
         cut's error never counts); a fault that fails requests stays armed through the next \
         recovery: `fired in recovery` counts the recoveries it acted in, `reported at \
         recovery` those whose open failed with its error (the open is then retried with the \
         fault disarmed, as after replacing a device), and the superblock copies and log \
         groups rotted while the power was off that the next recovery reported (a log group \
         at its LSN); `repaired`: damaged pages recovery rewrote, and reads served from the \
         data device after a flash-cache slot failed; `restored`: times damage that recovery \
         or a read reported was undone on the medium (as restoring those pages from a backup \
         would) and the same cycle opened again and verified; `checked` and \
         `unverified`: cycles with the fault whose workload was then verified whole, or only \
         in part or not at all (recovery refused the damaged database, or damaged pages hid \
         some outcomes); `unreported` (failed requests nobody heard of), `wrong values` \
         (damaged values served) and `lost` (acknowledged commits missing) must be 0; \
         `undetectable` counts findings explained by a lost write (the lookup of the key \
         passes through the page, or the key was on it), which no checksum can see.\n\n{FAULTS_HEADER}",
        pagoda::cli::provenance::provenance(&machine)
    )
}

/// One row per fault kind of this run.
fn fault_rows(report: &CrashTestReport, flags: &str, failed: bool) -> String {
    let date = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mut out = String::new();
    for (kind, c) in &report.faults {
        out += &format!(
            "| {date} | {} | `{flags}` | {} | {} | {} | {kind} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            pagoda::cli::provenance::commit(),
            report.cycles,
            report.commits_acknowledged,
            report.cuts_during_recovery,
            c.injected,
            c.fired,
            c.detected,
            c.at_recovery,
            c.detected_at_recovery,
            c.repaired,
            c.restored,
            c.checked,
            c.unverified,
            c.resets,
            c.unreported,
            c.undetectable,
            report.wrong_values,
            report.lost_commits,
            verdict(report, failed),
            pagoda_crashtest::by_target(c),
        );
    }
    out
}

/// One table row for this run. `flags` are the command's arguments after `crashtest`.
fn row(report: &CrashTestReport, flags: &str, failed: bool) -> String {
    let date = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    format!(
        "| {date} | {} | `{flags}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        pagoda::cli::provenance::commit(),
        report.cycles,
        report.commits_acknowledged,
        report.transactions_checked,
        report.transactions_unverified,
        report.cuts_during_recovery,
        report.cuts_mid_checkpoint,
        report.torn_pages_repaired,
        report.corruption_detected,
        report.lost_commits,
        report.partial_transactions,
        report.uncommitted_visible,
        report.isolation_violations,
        verdict(report, failed),
    )
}

/// Refuses `path` before the run when it exists and is not a crashtest page (so a long run
/// never ends in a write that cannot happen).
pub(super) fn check(path: &Path, faults: bool) -> CliResult<()> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.starts_with(&format!("{}\n", title(faults))) => Ok(()),
        Ok(text) if text.starts_with(title(!faults)) => Err(CliError::Usage(format!(
            "--publish {}: that page holds runs {} --faults; give another file",
            path.display(),
            if faults { "without" } else { "with" }
        ))),
        Ok(_) => Err(CliError::Usage(format!(
            "--publish {}: the file exists and was not written by `pagoda crashtest --publish`; \
             give a new file or a crashtest page",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::Other(format!(
            "--publish {}: cannot read it: {e}",
            path.display()
        ))),
    }
}

/// Appends this run's row to `path`, creating the page first when it does not exist.
pub(super) fn append(path: &Path, report: &CrashTestReport, failed: bool) -> CliResult<()> {
    let faults = !report.faults.is_empty();
    check(path, faults)?;
    // The binary's own arguments (`pagoda crashtest ARGS` runs it with ARGS).
    let flags: Vec<String> = std::env::args()
        .skip(1)
        .map(|a| a.replace(['`', '|'], ""))
        .collect();
    let flags = drop_publish(&flags).join(" ");
    let mut text = match (path.exists(), faults) {
        (true, _) => String::new(),
        (false, false) => preamble(),
        (false, true) => faults_preamble(),
    };
    if faults {
        text.push_str(&fault_rows(report, &flags, failed));
    } else {
        text.push_str(&row(report, &flags, failed));
    }
    let io = |e: std::io::Error| CliError::Other(format!("--publish {}: {e}", path.display()));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)
}

/// The flags without `--publish FILE` / `--publish=FILE` (the row is already in that file).
fn drop_publish(flags: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for f in flags {
        if std::mem::take(&mut skip) || f.starts_with("--publish=") {
            continue;
        }
        if f == "--publish" {
            skip = true;
            continue;
        }
        out.push(f.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(sabotage: Option<&str>) -> CrashTestReport {
        CrashTestReport {
            cycles: 7,
            commits_acknowledged: 40,
            sabotage: sabotage.map(str::to_string),
            ..CrashTestReport::default()
        }
    }

    #[test]
    fn a_page_is_created_then_grows_by_one_row_per_run() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("results/crashtest.md");
        append(&p, &report(None), false).unwrap();
        append(&p, &report(Some("skip-log-sync")), true).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with(TITLE));
        assert_eq!(text.matches(TITLE).count(), 1, "one preamble");
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| 20")).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(rows[0].ends_with("| pass |"), "{}", rows[0]);
        assert!(rows[1].ends_with("| sabotage caught |"), "{}", rows[1]);
    }

    #[test]
    fn another_file_is_refused_and_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("notes.md");
        std::fs::write(&p, "# my notes\n").unwrap();
        let e = append(&p, &report(None), false).unwrap_err().to_string();
        assert!(
            e.contains("not written by `pagoda crashtest --publish`"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# my notes\n");
    }

    #[test]
    fn a_run_with_faults_gets_a_row_per_kind_on_its_own_page() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("faults.md");
        let mut r = report(None);
        for k in ["bitrot", "enospc"] {
            r.faults.insert(k.into(), Default::default());
        }
        append(&p, &r, false).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with(FAULTS_TITLE), "{text}");
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| 20")).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(rows[0].contains("| bitrot |") && rows[1].contains("| enospc |"));
        // A plain run is refused on this page, and a fault run on the plain one.
        let e = append(&p, &report(None), false).unwrap_err().to_string();
        assert!(e.contains("runs with --faults"), "{e}");
        let plain = d.path().join("plain.md");
        append(&plain, &report(None), false).unwrap();
        let e = append(&plain, &r, false).unwrap_err().to_string();
        assert!(e.contains("runs without --faults"), "{e}");
    }

    #[test]
    fn verdicts_name_what_the_run_proved() {
        assert_eq!(verdict(&report(None), true), "FAILED");
        assert_eq!(verdict(&report(Some("x")), false), "sabotage NOT caught");
    }

    #[test]
    fn the_publish_flag_is_left_out_of_the_row() {
        let f = |v: &[&str]| drop_publish(&v.iter().map(ToString::to_string).collect::<Vec<_>>());
        assert_eq!(
            f(&["--cycles", "3", "--publish", "x.md", "--seed", "2"]),
            ["--cycles", "3", "--seed", "2"]
        );
        assert_eq!(f(&["--publish=x.md", "--cycles", "3"]), ["--cycles", "3"]);
    }
}

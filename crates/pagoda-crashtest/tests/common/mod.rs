//! Checks the crash-test suites share.

use pagoda_crashtest::CrashTestReport;

/// The run exercised what it claims to check: more acknowledged and checked transactions
/// than cycles, and at least one power cut during recovery.
pub fn assert_exercised(report: &CrashTestReport, cycles: u64) {
    assert!(
        report.commits_acknowledged > cycles,
        "too little work: {report:?}"
    );
    assert!(
        report.transactions_checked > cycles,
        "too few checked: {report:?}"
    );
    assert!(
        report.cuts_during_recovery > 0,
        "no cut during recovery: {report:?}"
    );
}

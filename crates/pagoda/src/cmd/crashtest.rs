//! `pagoda crashtest ARGS`: runs the crash tester, the binary `pagoda-crashtest`, with ARGS.
//! It is a separate package because it needs the engine's `fault-injection` feature
//! (sabotages, observers, the fault device), which product builds must not carry; cargo
//! unifies features within one package's build, so one binary could not have both.

use crate::error::{CliError, CliResult};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

/// The crash tester's file name.
const BINARY: &str = "pagoda-crashtest";

/// Replaces this process with the crash tester run with `args` (its exit status is then the
/// command's); an error when it is not built.
pub fn forward(args: &[OsString]) -> CliResult<()> {
    let Some(bin) = find() else {
        return Err(CliError::Usage(format!(
            "`pagoda crashtest` runs the crash tester `{BINARY}`, a separate binary built with \
             fault injection (kept out of this one), and none was found beside this binary or \
             on PATH: build it with `cargo build --release -p pagoda-crashtest-cli` (without \
             --release for target/debug)"
        )));
    };
    let err = std::process::Command::new(&bin).args(args).exec();
    Err(CliError::Other(format!(
        "cannot run the crash tester {}: {err}",
        bin.display()
    )))
}

/// `pagoda-crashtest` beside the running binary (cargo puts both in one target directory),
/// else the first on PATH.
fn find() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(BINARY)));
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(BINARY)).collect())
        .unwrap_or_default();
    beside.into_iter().chain(on_path).find(|p| p.is_file())
}

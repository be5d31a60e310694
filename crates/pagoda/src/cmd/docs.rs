//! What the clap definitions generate: shell completions (`pagoda completions SHELL`), and the
//! checked-in CLI reference (`docs/cli.md`) and man pages (`docs/man/`), which a test
//! (`reference.rs`) generates and compares, so they cannot drift from the definitions.

use crate::error::CliResult;
use clap::Command;

#[cfg(test)]
mod reference;

/// Writes the completion script for `shell` to stdout.
pub(crate) fn completions(mut cmd: Command, shell: clap_complete::Shell) -> CliResult<()> {
    clap_complete::generate(shell, &mut cmd, "pagoda", &mut std::io::stdout());
    Ok(())
}

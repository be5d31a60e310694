//! The `pagoda` command line. See `../shared/docs/CLI.md` for the contract.

mod cmd;
mod error;
mod progress;
mod report;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// pagoda: a transactional storage engine for flash SSDs, its SSD/disk emulator and workload lab.
#[derive(Debug, Parser)]
#[command(name = "pagoda", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Emulated SSD experiments: synthetic patterns and trace replay.
    #[command(subcommand)]
    Ssd(cmd::ssd::SsdCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ssd(c) => cmd::ssd::run(c),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pagoda: error: {e}");
            ExitCode::FAILURE
        }
    }
}

//! The `pagoda` command line.

use clap::Parser;

/// pagoda: a transactional storage engine for flash SSDs, its SSD/disk emulator and workload lab.
#[derive(Debug, Parser)]
#[command(name = "pagoda", version, about)]
enum Cli {}

fn main() {
    let _ = Cli::parse();
}

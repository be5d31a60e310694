//! The `pagoda` command line. Its reference, generated from these definitions, is `docs/cli.md`.

mod cmd;
mod plot;
mod readme;
mod spread;

// Shared with the crash tester's binary; `crate::error` etc. resolve through these.
use pagoda::cli::{error, progress, provenance, report, units};

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc, not glibc's malloc: the engine frees on one thread what another allocated
/// (versions collected by the background thread), and glibc then serves the allocating thread
/// from its slow path (`_int_malloc` was 12-17 % of a no-sync update run's CPU). Its v2 line:
/// v3 gave the large blocks of commit records back to the kernel, which zeroed them again on
/// every reuse (a 200k-record load: 170k rows/s on v3, 235-255k on v2).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v2's option enum (`mimalloc.h`; the -sys crate names
/// the options around it, 14 and 16, but not this one).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Memory freed to mimalloc goes back to the kernel after a second, not 10 ms: a loader
/// frees and reallocates ~100 KiB commit records every millisecond, and each purge made the
/// next one fault in a zeroed 2 MiB page (a 200k-record load: 95k-151k rows/s with 0.6-1.5 s
/// of system time; 164k-174k with 0.5 s at one second).
/// `MIMALLOC_PURGE_DELAY` in the environment wins.
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: sets one integer option of the allocator; any value is valid for it.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1000) };
}

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
    /// Workloads on the engine: YCSB, TPC-C, LinkBench.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
    /// Power-cut crash test of the engine on an emulated device: runs the crash tester, the
    /// separate binary `pagoda-crashtest` beside this one (built with fault injection, which
    /// stays out of this binary): `cargo build --release -p pagoda-crashtest-cli`.
    #[command(disable_help_flag = true)]
    Crashtest {
        /// The crash tester's flags (`pagoda crashtest --help` lists them).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<std::ffi::OsString>,
    },
    /// Reproduce the five papers' experiments (docs/papers.md): report, JSON and plots; sharded
    /// runs (plan/cell/report).
    #[command(subcommand)]
    Reproduce(cmd::reproduce::ReproduceCommand),
    /// Experiments written as TOML files: run, plan, one cell, report (as `reproduce`).
    #[command(subcommand)]
    Experiment(cmd::reproduce::ExperimentCommand),
    /// Advice from one run: `advise buffer` sizes the buffer pool (miss-ratio curve, TPS per device).
    #[command(subcommand)]
    Advise(cmd::advise::AdviseCommand),
    /// Serve a FUSE file system whose data lives on an emulated device (run a real database
    /// on the emulated SSD; FTL counters on SIGUSR1, MOUNT/.pagoda/stats and at unmount).
    Mount(cmd::mount::MountArgs),
    /// Verify a database's pages and log offline.
    Inspect {
        /// The database directory.
        path: std::path::PathBuf,
    },
    /// Print a shell completion script to stdout, e.g. `pagoda completions bash >
    /// ~/.local/share/bash-completion/completions/pagoda`.
    Completions {
        /// The shell the script is for.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    cmd::bench::PROCESS_START.get_or_init(std::time::Instant::now);
    tune_allocator();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return pagoda::cli::usage_error("pagoda", &e),
    };
    let result = match cli.command {
        Command::Ssd(c) => cmd::ssd::run(c),
        Command::Bench(c) => cmd::bench::run(c),
        Command::Crashtest { args } => cmd::crashtest::forward(&args),
        Command::Reproduce(c) => cmd::reproduce::run(c),
        Command::Experiment(c) => cmd::reproduce::run_experiment(c),
        Command::Inspect { path } => cmd::inspect::run(&path),
        Command::Advise(c) => cmd::advise::run(c),
        Command::Mount(a) => cmd::mount::run(&a),
        Command::Completions { shell } => cmd::docs::completions(Cli::command(), shell),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pagoda: error: {e}");
            ExitCode::FAILURE
        }
    }
}

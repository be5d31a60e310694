//! `pagoda-crashtest`: the crash tester's binary (`pagoda crashtest ARGS` runs it with ARGS).
//! It is built with the engine's `fault-injection` feature (sabotages, observers, the fault
//! device); the `pagoda` binary, a separate package, is built without it.

mod publish;
mod run;

use clap::Parser;
use std::process::ExitCode;

/// Power-cut crash test of the pagoda engine on an emulated device.
#[derive(Debug, Parser)]
#[command(name = "pagoda crashtest", version, about)]
struct Cli {
    #[command(flatten)]
    args: run::CrashtestArgs,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return pagoda::cli::usage_error("pagoda crashtest", &e),
    };
    match run::run(&cli.args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pagoda crashtest: error: {e}");
            ExitCode::FAILURE
        }
    }
}

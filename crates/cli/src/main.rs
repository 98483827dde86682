//! `iolearn`: the command-line tool. Glue only: the work is done by the library crates.

mod files;
mod model;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Machine learning inside the Linux storage stack.
#[derive(Parser)]
#[command(name = "iolearn", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Import, inspect and run model files.
    #[command(subcommand)]
    Model(model::ModelCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Model(cmd) => model::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Broken pipes (e.g. `| head`) are not errors worth reporting.
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("iolearn: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

//! `iolearn`: the command-line tool. Glue only: the work is done by the library crates.

mod files;
mod model;
mod python;
mod tune;

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
    /// Tune this machine's kernel (eBPF observes, the model decides, sysfs and fadvise act).
    #[command(subcommand)]
    Tune(tune::TuneCommand),
    /// KML readahead tuning in the simulator: sweep, train, evaluate, all (runs the Python
    /// pipeline `python -m iolearn.readahead`; `iolearn readahead --help` shows its options).
    #[command(disable_help_flag = true)]
    Readahead {
        /// Arguments for the pipeline, e.g. `all --seconds 10 --out results/readahead`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Model(cmd) => model::run(cmd),
        Command::Tune(cmd) => tune::run_command(cmd),
        Command::Readahead { args } => match python::run_module("iolearn.readahead", &args) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
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

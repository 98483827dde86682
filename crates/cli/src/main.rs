//! `iolearn`: the command-line tool. Glue only: the work is done by the library crates.

mod args;
mod files;
mod model;
mod probe;
mod probe_ssd;
mod python;
mod replay;
mod sched;
mod sim_ssd;
mod syscalls;
mod trace;
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
    /// Observe this machine's kernel with eBPF and record features.
    #[command(subcommand)]
    Probe(probe::ProbeCommand),
    /// Benchmarks on this machine: `iolearn bench readahead --real`, `iolearn bench admission
    /// --real`, `iolearn bench mittcfq --real` (run the Python harnesses `iolearn.bench_real`,
    /// `iolearn.bench_admission`, `iolearn.bench_mittcfq`; `--help` shows their options).
    #[command(disable_help_flag = true)]
    Bench {
        /// `readahead|admission|mittcfq --real [options]`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Evaluations in the simulator: `iolearn eval admission` trains and compares the
    /// tail-latency policies (runs `python -m iolearn.admission`); `iolearn eval ml-mittos`
    /// runs ML-MittOS's own protocol (`python -m iolearn.ml_mittos`); `iolearn eval mittcfq`
    /// MittOS's evaluation on disks behind bfq and mq-deadline (`python -m iolearn.mittcfq`);
    /// `iolearn eval linnos-drift` LinnOS retrained when a device's inflection point drifts
    /// (`python -m iolearn.linnapp`); `--help` shows options.
    #[command(disable_help_flag = true)]
    Eval {
        /// `admission|ml-mittos|mittcfq|linnos-drift [options]`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Replay traces on real devices: `iolearn replay block --replicas F1,F2,F3 --policy P TRACE`.
    #[command(subcommand)]
    Replay(replay::ReplayCommand),
    /// Block I/O traces: stats, cut, busiest, rerate, convert, generate, family.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// Simulations: `iolearn sim ssd --trace T --preset enterprise --replicas 3 --out lat.parquet`.
    #[command(subcommand)]
    Sim(sim_ssd::SimCommand),
    /// Tune this machine's kernel (eBPF observes, the model decides, sysfs and fadvise act).
    #[command(subcommand)]
    Tune(tune::TuneCommand),
    /// (Internal) a `trace record --backpressure` watchdog: releases the capture's freezer
    /// group when the capture ends, however it ends.
    #[command(name = "__release-freezer", hide = true)]
    ReleaseFreezer {
        /// The group.
        dir: std::path::PathBuf,
        /// Where its processes go back to.
        home: std::path::PathBuf,
    },
    /// KML readahead tuning in the simulator: sweep, train, evaluate, all (runs the Python
    /// pipeline `python -m iolearn.readahead`; `iolearn readahead --help` shows its options).
    #[command(disable_help_flag = true)]
    Readahead {
        /// Arguments for the pipeline, e.g. `all --seconds 10 --out results/readahead`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `bench readahead|admission --real ...` -> (the harness module, its arguments).
fn bench_args(args: &[String]) -> anyhow::Result<(&'static str, Vec<String>)> {
    let (module, simulated) = match args.first().map(String::as_str) {
        Some("readahead") => ("iolearn.bench_real", "iolearn readahead evaluate"),
        Some("admission") => ("iolearn.bench_admission", "iolearn eval admission"),
        Some("mittcfq") => ("iolearn.bench_mittcfq", "iolearn eval mittcfq"),
        Some("--help" | "-h") | None => {
            anyhow::bail!("usage: iolearn bench readahead|admission|mittcfq --real [options] (see --help)")
        }
        Some(other) => anyhow::bail!("unknown benchmark {other:?} (available: readahead, admission, mittcfq)"),
    };
    let rest: Vec<String> = args[1..].iter().filter(|a| *a != "--real").cloned().collect();
    if !args.iter().any(|a| a == "--real") && !rest.iter().any(|a| a == "--help" || a == "-h") {
        anyhow::bail!(
            "iolearn bench {} needs --real (the simulated evaluation is `{simulated}`)",
            args[0]
        );
    }
    Ok((module, rest))
}

/// Parse the command line; a usage error is one line on stderr (`iolearn: error: ...`) and exit
/// status 2, help and version print as usual.
fn parse() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            // clap's message is its first paragraph (an argument list may follow on indented
            // lines); the usage and tips after the blank line are left to --help.
            let text = e.render().to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let msg = first.join(" ");
            eprintln!("iolearn: error: {} (see --help)", msg.trim_start_matches("error: "));
            Err(ExitCode::from(2))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match cli.command {
        Command::Model(cmd) => model::run(cmd),
        Command::Tune(cmd) => tune::run_command(cmd),
        Command::Probe(cmd) => probe::run(cmd),
        Command::Trace(cmd) => trace::run(cmd),
        Command::Replay(cmd) => replay::run(cmd),
        Command::Sim(cmd) => sim_ssd::run(cmd),
        Command::Eval { args } => match args.split_first() {
            Some((what, rest)) if what == "admission" => Err(python::run_module("iolearn.admission", rest)),
            Some((what, rest)) if what == "ml-mittos" => Err(python::run_module("iolearn.ml_mittos", rest)),
            Some((what, rest)) if what == "mittcfq" => Err(python::run_module("iolearn.mittcfq", rest)),
            Some((what, rest)) if what == "linnos-drift" => Err(python::run_module("iolearn.linnapp", rest)),
            Some((what, _)) if what != "--help" && what != "-h" => Err(anyhow::anyhow!(
                "unknown evaluation {what:?} (available: admission, ml-mittos, mittcfq, linnos-drift)"
            )),
            _ => Err(anyhow::anyhow!(
                "usage: iolearn eval admission|ml-mittos|mittcfq|linnos-drift [options] (see --help)"
            )),
        },
        Command::Bench { args } => match bench_args(&args) {
            Ok((module, rest)) => Err(python::run_module(module, &rest)),
            Err(e) => Err(e),
        },
        Command::Readahead { args } => Err(python::run_module("iolearn.readahead", &args)),
        Command::ReleaseFreezer { dir, home } => {
            iolearn_probe::freezer::watchdog(&dir, &home).map_err(anyhow::Error::msg)
        }
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
            // One line, whatever the error quotes: control characters (a newline or an escape
            // sequence from a file name or a file) are shown escaped.
            eprintln!("iolearn: error: {}", iolearn_safeio::printable(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

//! Command-line interface. One file per command group; this file only dispatches.

use clap::{Parser, Subcommand};

pub mod model;

#[derive(Debug, Parser)]
#[command(
    name = "demeter-coordinator",
    version,
    about = "Demeter coordinator: keeps Flink jobs resource-efficient under changing load"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Fit the job models offline from observations and query them (fit, predict, pareto).
    Model(model::ModelArgs),
}

pub fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Model(args) => model::run(args),
    }
}

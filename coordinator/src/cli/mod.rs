//! Command-line interface. One file per command group; this file only dispatches.

mod agents;
mod certs;
mod failpoint;
mod job;
mod job_remote;
mod job_render;
mod model;
mod profile;
mod remote;
mod replay;
mod serve;
mod simulate;
mod simulate_output;
mod tuning_render;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "demeter-coordinator",
    version,
    about = "Demeter coordinator: keeps Flink jobs resource-efficient under changing load",
    long_about = "Demeter coordinator: receives node agents' samples over QUIC with mutual TLS, \
                  stores them durably, models the managed Flink jobs and reconfigures them safely."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the coordinator daemon.
    Run(serve::RunArgs),
    /// Manage the cluster's certificate authority and node certificates.
    Certs(certs::CertsArgs),
    /// List the agents connected to a running coordinator.
    Agents(agents::AgentsArgs),
    /// Register Flink jobs and reconfigure them safely (savepoint, restart, rollback): through
    /// the running daemon with --coordinator (agents run the TaskManagers), or in this process
    /// without it (local mode, for labs without agents).
    Job(job::JobArgs),
    /// Fit the job models offline from observations and query them (fit, predict, pareto).
    Model(model::ModelArgs),
    /// Run one profiling batch on real Flink: a small separate cluster per candidate
    /// configuration, measured, failure-injected and torn down; writes observations.
    Profile(profile::ProfileArgs),
    /// Replay a rate trace through the digital twin under a policy (static, reactive,
    /// demeter, oracle, or all) and report cost, QoS, recoveries and changes.
    #[command(long_about = SIMULATE_ABOUT)]
    Simulate(simulate::SimulateArgs),
    /// Feed ticks a tuned job recorded (`record_ticks`) to a policy offline and print what it
    /// would have done and why.
    Replay(replay::ReplayArgs),
}

const SIMULATE_ABOUT: &str = "\
Replay a rate trace through the digital twin (a deterministic, per-second simulator of the Flink
job described by --twin) under one policy or all of them, and report what each cost and how well
it kept the QoS.

Policies: static (the peak default, never changes; every ratio is relative to it), reactive
(Flink's autoscaler rule, parallelism only), demeter, and oracle: the offline optimum with
perfect knowledge (true curves, future rates, failure schedule) — a dynamic program over
--oracle-epoch epochs that holds only configurations truly meeting both QoS bounds, with at
most --oracle-max-changes changes disrupting at most --oracle-max-disruption % of the run (by
default the targets' limits: 12 changes per 18 h, 1.5 %).

Seconds over the latency QoS are split by cause: steady, changes (downtime + catch-up) and
failure recoveries (failure -> backlog drained, excused up to the recovery QoS). The latency
figure (>QoS%) EXCLUDES failure recoveries, which the recovery QoS governs and which every
policy suffers alike; all% includes them. Every policy's configurations stay within the
twin's [cluster] totals (--unbounded lifts that); profiling copies run only on what production
leaves of it (production always wins).

Example (the benchmark):
  demeter-coordinator simulate --trace data/traces/CARS_3D_1S_4_sub_35K_max.csv \\
    --twin coordinator/testdata/twin-benchmark.toml --policy all --failures-every 45m";

pub fn run() -> anyhow::Result<()> {
    let command = Cli::parse().command;
    // The daemon sets up logging from its config file; the one-shot commands log progress at
    // info to stderr, so their stdout stays clean for tables and JSON. DEMETER_LOG (a level or
    // `target=level` list) overrides that, e.g. to see a policy's debug reasoning in `simulate`.
    if !matches!(command, Command::Run(_)) {
        let filter = std::env::var("DEMETER_LOG").unwrap_or_else(|_| "info,quinn=warn".into());
        demeter_common::service::init_logging(&filter)?;
    }
    match command {
        Command::Run(args) => serve::run(args),
        Command::Certs(args) => certs::run(args),
        Command::Agents(args) => agents::run(args),
        Command::Model(args) => model::run(args),
        Command::Job(args) => job::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Profile(args) => profile::run(args),
        Command::Replay(args) => replay::run(args),
    }
}

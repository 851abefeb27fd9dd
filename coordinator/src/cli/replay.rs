//! `demeter-coordinator replay`: feeds the ticks a tuned job recorded (`record_ticks` in its
//! `[[tuning.jobs]]` entry) to a policy offline and prints what it would have done and why —
//! to answer "why did it not move?" or to try other knobs on real production data. Every
//! reconfiguration is taken as done at once and every profiling batch as measuring nothing:
//! the recorded ticks keep the configuration production ran, so the first decisions are what
//! the live loop would have decided, later ones only indicative. `DEMETER_LOG=debug` shows the
//! policy's reasoning.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use demeter_coordinator::models::space::SearchSpace;
use demeter_coordinator::models::surrogate::Qos;
use demeter_coordinator::policy::demeter::DemeterConfig;
use demeter_coordinator::policy::{Action, ReconfigureOutcome};
use demeter_coordinator::tuner::board::reason_text;
use demeter_coordinator::tuner::shell::{RecordedTick, policy_named};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The recorded ticks (JSON lines written by the daemon's `record_ticks`).
    #[arg(long)]
    ticks: PathBuf,
    /// demeter, reactive or static.
    #[arg(long, default_value = "demeter")]
    policy: String,
    /// The job's search space (TOML, as registered); default: the paper's grid.
    #[arg(long)]
    space: Option<PathBuf>,
    /// p95 latency QoS, ms.
    #[arg(long, default_value_t = 1000.0)]
    qos_latency_ms: f64,
    /// Recovery-time QoS, s.
    #[arg(long, default_value_t = 120.0)]
    qos_recovery_s: f64,
    /// The Demeter policy's knobs (the body of a `[tuning.jobs.demeter]` table).
    #[arg(long)]
    policy_config: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    };
    let space = match &args.space {
        Some(path) => SearchSpace::from_toml(&read(path)?)?,
        None => SearchSpace::default(),
    };
    let config: DemeterConfig = match &args.policy_config {
        Some(path) => DemeterConfig::from_toml(&read(path)?)
            .with_context(|| format!("{} is not a Demeter policy config", path.display()))?,
        None => DemeterConfig::default(),
    };
    let qos = Qos {
        latency_p95_ms: args.qos_latency_ms,
        recovery_s: args.qos_recovery_s,
    };
    let mut policy = policy_named(&args.policy, space, qos, config, args.seed)?;
    let mut origin = None;
    let mut ticks = 0usize;
    for (n, line) in read(&args.ticks)?.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let recorded: RecordedTick = serde_json::from_str(line)
            .with_context(|| format!("{} line {}", args.ticks.display(), n + 1))?;
        let origin = *origin.get_or_insert(recorded.at_ms);
        let now = Duration::from_millis(recorded.at_ms.saturating_sub(origin));
        policy.handle_observation(now, &recorded.tick);
        if policy.poll_timeout().is_some_and(|d| d <= now) {
            policy.handle_timeout(now);
        }
        ticks += 1;
        while let Some(action) = policy.poll_action() {
            let at = now.as_secs();
            match action {
                Action::Reconfigure { to, kind, decision } => {
                    println!(
                        "[{at:6} s] reconfigure {kind:?} {} -> {to}: {}",
                        recorded.tick.config,
                        reason_text(&decision.reason)
                    );
                    policy.handle_reconfigured(
                        now,
                        &ReconfigureOutcome {
                            running: to,
                            succeeded: true,
                            downtime_s: 0.0,
                        },
                    );
                }
                Action::Profile {
                    batch,
                    candidates,
                    rate,
                    decision,
                } => {
                    let list: Vec<String> = candidates.iter().map(|c| c.to_string()).collect();
                    println!(
                        "[{at:6} s] profile batch {batch} at {rate:.0}/s: {}: {}",
                        list.join(", "),
                        reason_text(&decision.reason)
                    );
                    policy.handle_profile_results(now, batch, &[]);
                }
            }
        }
    }
    println!("{ticks} ticks replayed");
    Ok(())
}

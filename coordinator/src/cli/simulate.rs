//! `demeter-coordinator simulate`: replay a rate trace through the digital twin under one policy
//! or all of them, print what each cost and how well it kept the QoS, and write the timeline and
//! the decisions. The wall clock is read only here, around the policy's calls (decision time)
//! and around each run (replay speed) — the twin itself runs in virtual time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

use demeter_coordinator::models::observations::Observation;
use demeter_coordinator::models::space::{JobConfig, SearchSpace};
use demeter_coordinator::models::surrogate::Qos;
use demeter_coordinator::policy::baselines::OracleSettings;
use demeter_coordinator::policy::demeter::DemeterConfig;
use demeter_coordinator::policy::registry::{self, POLICY_NAMES, PolicyContext};
use demeter_coordinator::policy::{
    Action, ForecastSummary, JobTick, Policy, ProfilingRoom, ReconfigureOutcome,
};
use demeter_coordinator::trace::parse_rate_trace;
use demeter_coordinator::twin::profiling::ProfilingTimes;
use demeter_coordinator::twin::report::DecisionTime;
use demeter_coordinator::twin::sim::{Scenario, SimOptions, SimRun, rates_per_second, simulate};
use demeter_coordinator::twin::truth::GroundTruth;

use super::simulate_output::{print_comparison, print_summary, write_decisions, write_timeline};

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Rate trace (`timestamp|value`, events/s per second), e.g. data/traces/CARS_3D_1S_4_sub_35K_max.csv.
    #[arg(long)]
    trace: PathBuf,
    /// Ground truth of the simulated job (e.g. coordinator/testdata/twin-benchmark.toml).
    #[arg(long)]
    twin: PathBuf,
    /// Policy to run: static, reactive, demeter, oracle, or all (a comparison normalised to static).
    #[arg(long, default_value = "all")]
    policy: String,
    /// Kill a production TaskManager this often (e.g. 45m, 90s, 1h); none by default.
    #[arg(long, value_parser = parse_duration)]
    failures_every: Option<Duration>,
    /// p95 latency QoS in milliseconds.
    #[arg(long, default_value_t = 500.0)]
    qos_latency_ms: f64,
    /// Recovery-time QoS in seconds (failure → caught up).
    #[arg(long, default_value_t = 180.0)]
    qos_recovery_s: f64,
    /// The Demeter policy's knobs: a TOML file with the body of a `[tuning.jobs.demeter]` table
    /// (only what differs from the defaults).
    #[arg(long)]
    policy_config: Option<PathBuf>,
    /// Search space TOML (default: the Demeter paper's grid).
    #[arg(long)]
    space: Option<PathBuf>,
    /// Let production take more than the twin's `[cluster]` holds. By default every policy's
    /// configurations are bounded by the cluster's totals (the search space's
    /// `max_total_cpu_cores` / `max_total_memory_mb` where it sets none), as an operator's
    /// machines bound them; the twin itself would give production whatever it asks. Figures
    /// before 2026-12-07 (results history, stop 25) were measured unbounded.
    #[arg(long)]
    unbounded: bool,
    /// The static peak default production starts in, e.g. "p=24,slots=1,mem=4g,cpu=1,ckpt=10s"
    /// (default: the paper's 24 × (1 CPU, 4 GB, 1 slot), 10 s).
    #[arg(long)]
    static_config: Option<String>,
    /// Replay only this much of the trace (e.g. 2h), from --skip.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Skip this much of the trace's beginning.
    #[arg(long, value_parser = parse_duration)]
    skip: Option<Duration>,
    /// Write the timeline (CSV, one row per --timeline-every seconds and policy) here.
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Timeline resolution in seconds.
    #[arg(long, default_value_t = 10)]
    timeline_every: u64,
    /// Write every action with its decision record, and every outcome, as JSON lines here.
    #[arg(long)]
    decisions: Option<PathBuf>,
    /// Seed of the measurement noise and profiling draws (same seed, same run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the summaries as JSON (one object per policy) instead of tables.
    #[arg(long)]
    json: bool,
    /// Oracle: length of a decision epoch (the DP's time step; changes happen at epoch starts).
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    oracle_epoch: Duration,
    /// Oracle: most reconfigurations in the run (default: 12 per 18 h scaled to the run's
    /// length, at least 1 — the target's limit for Demeter).
    #[arg(long)]
    oracle_max_changes: Option<u32>,
    /// Oracle: most seconds its changes may disrupt (downtime + catch-up), in % of the run
    /// (default: the 1.5 % of seconds over the latency QoS the target allows a policy).
    #[arg(long, default_value_t = 1.5)]
    oracle_max_disruption: f64,
}

/// Parses `45m`, `90s`, `1h`, `1.5h` or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 45m, 90s or 1h"))?;
    let scale = match unit.trim() {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use s, m or h)"
            ));
        }
    };
    let seconds = value * scale;
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(format!("{text:?} is not a non-negative duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The twin's cluster bounds every policy's configurations where the search space does not:
/// production may not take more cores or memory than the machines have.
fn bounded_by_cluster(
    mut space: SearchSpace,
    truth: &GroundTruth,
    static_config: &JobConfig,
) -> SearchSpace {
    let (cpu_cores, memory_mb) = truth.cluster.capacity(static_config);
    space.max_total_cpu_cores.get_or_insert(cpu_cores);
    space.max_total_memory_mb.get_or_insert(memory_mb);
    space
}

/// One policy's run, with the wall-clock figures measured around it.
pub struct Outcome {
    pub run: SimRun,
    pub wall: Duration,
}

pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let truth = GroundTruth::from_toml(&read(&args.twin)?)
        .with_context(|| format!("ground truth {}", args.twin.display()))?;
    let space = match &args.space {
        Some(path) => SearchSpace::from_toml(&read(path)?)
            .with_context(|| format!("search space {}", path.display()))?,
        None => SearchSpace::default(),
    };
    let static_config = match &args.static_config {
        Some(text) => text.parse::<JobConfig>()?,
        None => JobConfig::paper_default(),
    };
    let space = if args.unbounded {
        space
    } else {
        bounded_by_cluster(space, &truth, &static_config)
    };
    if let Some(why) = space.violation(&static_config) {
        bail!(
            "the static configuration {static_config} is not deployable: {why} \
             (--unbounded lets production outgrow the twin's [cluster])"
        );
    }
    if !(args.qos_latency_ms > 0.0 && args.qos_recovery_s > 0.0) {
        bail!("--qos-latency-ms and --qos-recovery-s must be positive");
    }
    let trace = parse_rate_trace(&read(&args.trace)?)
        .with_context(|| format!("trace {}", args.trace.display()))?;
    let all = rates_per_second(&trace);
    let skip = args.skip.map_or(0, |d| d.as_secs() as usize).min(all.len());
    let end = args
        .duration
        .map_or(all.len(), |d| skip.saturating_add(d.as_secs() as usize))
        .min(all.len());
    let rates = &all[skip..end];
    if rates.is_empty() {
        bail!("nothing to replay: the trace (after --skip/--duration) is empty");
    }
    let qos = Qos {
        latency_p95_ms: args.qos_latency_ms,
        recovery_s: args.qos_recovery_s,
    };
    let names: Vec<&str> = if args.policy == "all" {
        POLICY_NAMES.to_vec()
    } else {
        vec![args.policy.as_str()]
    };
    if !(args.oracle_epoch.as_secs() > 0 && (0.0..=100.0).contains(&args.oracle_max_disruption)) {
        bail!("--oracle-epoch must be at least 1 s and --oracle-max-disruption a percentage");
    }
    let failures_every_s = args.failures_every.map(|d| d.as_secs()).filter(|s| *s > 0);
    let demeter: DemeterConfig = match &args.policy_config {
        Some(path) => DemeterConfig::from_toml(&read(path)?)
            .with_context(|| format!("{} is not a Demeter policy config", path.display()))?,
        None => DemeterConfig::default(),
    };
    let ctx = PolicyContext {
        demeter: &demeter,
        space: &space,
        qos,
        seed: args.seed,
        static_config,
        truth: &truth,
        rates,
        failures_every_s,
        oracle: OracleSettings {
            epoch_s: args.oracle_epoch.as_secs(),
            max_changes: args.oracle_max_changes,
            max_disruption_share: args.oracle_max_disruption / 100.0,
            ..OracleSettings::default()
        },
    };
    let options = SimOptions {
        qos,
        failures_every_s,
        seed: args.seed,
        profiling: ProfilingTimes::default(),
        timeline_every_s: if args.timeline.is_some() {
            args.timeline_every.max(1)
        } else {
            0
        },
    };
    let scenario = Scenario {
        truth: &truth,
        space: &space,
        rates,
        initial: static_config,
    };
    let mut outcomes = Vec::new();
    for name in names {
        let policy = match registry::build(name, &ctx) {
            Ok(policy) => policy,
            // With `all`, a policy that cannot be built is reported and skipped.
            Err(e) if args.policy == "all" => {
                eprintln!("skipping {name}: {e}");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        tracing::info!(policy = name, seconds = rates.len(), "simulating");
        let mut timed = Timed::new(policy);
        let started = Instant::now();
        let mut run = simulate(&mut timed, scenario, options);
        let wall = started.elapsed();
        run.summary.decision_time = Some(timed.time);
        outcomes.push(Outcome { run, wall });
    }
    if let Some(path) = &args.timeline {
        write_timeline(path, &outcomes)?;
    }
    if let Some(path) = &args.decisions {
        write_decisions(path, &outcomes)?;
    }
    if args.json {
        for outcome in &outcomes {
            println!("{}", serde_json::to_string(&outcome.run.summary)?);
        }
        return Ok(());
    }
    let trace_name = args
        .trace
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    println!(
        "trace {trace_name}: {} s ({:.1} h) from second {skip}; twin {}; failures every {}; QoS p95 ≤ {} ms, recovery ≤ {} s; static = {static_config}",
        rates.len(),
        rates.len() as f64 / 3600.0,
        args.twin.display(),
        args.failures_every
            .map_or_else(|| "never".to_owned(), |d| format!("{} s", d.as_secs())),
        qos.latency_p95_ms,
        qos.recovery_s,
    );
    if outcomes.len() == 1 {
        print_summary(&outcomes[0]);
    } else {
        print_comparison(&outcomes);
    }
    Ok(())
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Measures the wall-clock time of every call into the policy (the decision time), so the
/// sans-IO policy and the twin never read a clock themselves.
struct Timed {
    inner: Box<dyn Policy>,
    time: DecisionTime,
}

impl Timed {
    fn new(inner: Box<dyn Policy>) -> Self {
        Timed {
            inner,
            time: DecisionTime::default(),
        }
    }

    fn measure<T>(&mut self, call: impl FnOnce(&mut dyn Policy) -> T) -> T {
        let started = Instant::now();
        let out = call(self.inner.as_mut());
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        self.time.calls += 1;
        self.time.total_ms += ms;
        self.time.max_ms = self.time.max_ms.max(ms);
        out
    }
}

impl Policy for Timed {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn handle_observation(&mut self, now: Duration, tick: &JobTick) {
        self.measure(|p| p.handle_observation(now, tick));
    }

    fn handle_profile_results(&mut self, now: Duration, batch: u64, results: &[Observation]) {
        self.measure(|p| p.handle_profile_results(now, batch, results));
    }

    fn handle_profiling_room(&mut self, now: Duration, room: ProfilingRoom) {
        self.measure(|p| p.handle_profiling_room(now, room));
    }

    fn handle_reconfigured(&mut self, now: Duration, outcome: &ReconfigureOutcome) {
        self.measure(|p| p.handle_reconfigured(now, outcome));
    }

    fn handle_timeout(&mut self, now: Duration) {
        self.measure(|p| p.handle_timeout(now));
    }

    fn poll_timeout(&self) -> Option<Duration> {
        self.inner.poll_timeout()
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.measure(|p| p.poll_action())
    }

    fn forecast(&self) -> Option<ForecastSummary> {
        self.inner.forecast()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("45m").unwrap(), Duration::from_secs(2700));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("-1m").is_err());
        assert!(parse_duration("m").is_err());
    }
}

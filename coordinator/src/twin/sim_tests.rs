//! Tests of the simulation loop: determinism, profiling accounted apart from production,
//! failures and their recoveries, the policy's view of the job.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::models::observations::Observation;
use crate::policy::baselines::{Fixed, Reactive, ReactiveSettings};
use crate::policy::{Decision, ProfilingRoom, Reason};

use crate::twin::testing::{benchmark_truth as truth, options as opts};

fn options(seed: u64, failures_every_s: Option<u64>) -> SimOptions {
    opts(seed, failures_every_s, 10)
}

/// A rate that swings like a day, compressed into `seconds`.
fn wave(seconds: usize, low: f64, high: f64) -> Vec<f64> {
    (0..seconds)
        .map(|t| {
            let phase = t as f64 / seconds as f64 * std::f64::consts::TAU;
            low + (high - low) * 0.5 * (1.0 - phase.cos())
        })
        .collect()
}

fn go(policy: &mut dyn Policy, rates: &[f64], options: SimOptions) -> SimRun {
    crate::twin::testing::run(policy, rates, JobConfig::paper_default(), options)
}

/// Records every tick; orders one profiling batch at `profile_at`.
#[derive(Default)]
struct Script {
    profile_at: Option<Duration>,
    candidates: Vec<JobConfig>,
    ticks: Vec<JobTick>,
    results: Vec<(Duration, u64, Vec<Observation>)>,
    actions: Vec<Action>,
}

impl Policy for Script {
    fn name(&self) -> &str {
        "script"
    }
    fn handle_observation(&mut self, now: Duration, tick: &JobTick) {
        self.ticks.push(*tick);
        if self.profile_at == Some(now) {
            self.actions.push(Action::Profile {
                batch: 7,
                candidates: self.candidates.clone(),
                rate: 20_000.0,
                decision: Decision {
                    at: now,
                    reason: Reason::Rule("test".into()),
                    forecast: None,
                    chosen: None,
                    best_rejected: None,
                },
            });
        }
    }
    fn handle_profiling_room(&mut self, _now: Duration, _room: ProfilingRoom) {}

    fn handle_profile_results(&mut self, now: Duration, batch: u64, results: &[Observation]) {
        self.results.push((now, batch, results.to_vec()));
    }
    fn handle_reconfigured(&mut self, _now: Duration, _outcome: &ReconfigureOutcome) {}
    fn handle_timeout(&mut self, _now: Duration) {}
    fn poll_timeout(&self) -> Option<Duration> {
        None
    }
    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop()
    }
}

#[test]
fn same_seed_same_run() {
    // Low long enough for a scale-down, then a day-like swing up to the peak.
    let mut rates = vec![5_000.0; 100 * 60];
    rates.extend(wave(4 * 3600, 5_000.0, 35_000.0));
    let a = go(
        &mut Reactive::new(SearchSpace::default(), ReactiveSettings::default()),
        &rates,
        options(3, Some(2700)),
    );
    let b = go(
        &mut Reactive::new(SearchSpace::default(), ReactiveSettings::default()),
        &rates,
        options(3, Some(2700)),
    );
    assert_eq!(a.summary, b.summary);
    assert_eq!(a.events, b.events);
    assert_eq!(a.timeline, b.timeline);
    assert!(
        a.summary.reconfigurations() > 0,
        "the run should exercise changes"
    );

    let mut one = Script::default();
    let mut other = Script::default();
    go(&mut one, &rates[..600], options(3, None));
    go(&mut other, &rates[..600], options(4, None));
    assert_ne!(
        one.ticks, other.ticks,
        "the seed drives the measurement noise"
    );
}

#[test]
fn ticks_are_noisy_measurements_of_the_truth() {
    let rates = vec![20_000.0; 600];
    let mut script = Script::default();
    go(&mut script, &rates, options(9, None));
    let truth = truth();
    let c = JobConfig::paper_default();
    let exact = truth.outcomes(&c, 20_000.0);
    let n = script.ticks.len() as f64;
    let mean_busy = script
        .ticks
        .iter()
        .map(|t| t.busy_fraction.unwrap())
        .sum::<f64>()
        / n;
    assert!((mean_busy - exact.busy_fraction).abs() < 0.01);
    let capacity_estimates: Vec<f64> = script
        .ticks
        .iter()
        .filter_map(|t| t.observation()?.capacity_estimate())
        .collect();
    let mean_capacity = capacity_estimates.iter().sum::<f64>() / capacity_estimates.len() as f64;
    assert!((mean_capacity / exact.capacity - 1.0).abs() < 0.05);
    assert!(
        script
            .ticks
            .iter()
            .any(|t| t.latency_p95_ms != Some(exact.latency_p95_ms))
    );
}

#[test]
fn profiling_is_accounted_apart_from_production() {
    let rates = vec![20_000.0; 3600];
    let candidates: Vec<JobConfig> = vec![
        "p=8,slots=2,mem=2g,cpu=2,ckpt=30".parse().unwrap(),
        "p=12,slots=1,mem=4g,cpu=1,ckpt=10".parse().unwrap(),
    ];
    let mut script = Script {
        profile_at: Some(Duration::from_secs(100)),
        candidates: candidates.clone(),
        ..Script::default()
    };
    // A cluster with room for both copies beside production.
    let mut roomy = truth();
    roomy.cluster.spare_share = 1.0;
    let with = crate::twin::testing::run_on(
        roomy,
        &mut script,
        &rates,
        JobConfig::paper_default(),
        options(2, None),
    );
    let without = go(&mut Fixed, &rates, options(2, None));
    assert_eq!(
        with.summary.cpu_core_hours.production,
        without.summary.cpu_core_hours.production
    );
    assert_eq!(without.summary.cpu_core_hours.profiling, 0.0);

    // One batch, both candidates measured, delivered when the longest copy ended.
    assert_eq!(script.results.len(), 1);
    let (at, batch, results) = &script.results[0];
    assert_eq!(*batch, 7);
    assert_eq!(results.len(), 2);
    let truth = truth();
    let times = ProfilingTimes::default();
    let duration = |o: &Observation| {
        truth.tm_start_s
            + truth.restart_s(&o.config)
            + times.warmup_s
            + times.measure_s
            + o.recovery_s.unwrap()
    };
    let longest = results.iter().map(duration).fold(0.0, f64::max);
    assert_eq!(at.as_secs(), (100.0 + longest).ceil() as u64);
    let cpu_h: f64 = results
        .iter()
        .map(|o| o.config.total_cpu_cores() * duration(o) / 3600.0)
        .sum();
    let memory_gb_h: f64 = results
        .iter()
        .map(|o| o.config.total_memory_mb() / 1024.0 * duration(o) / 3600.0)
        .sum();
    assert!((with.summary.cpu_core_hours.profiling - cpu_h).abs() < 1e-9);
    assert!((with.summary.memory_gb_hours.profiling - memory_gb_h).abs() < 1e-9);
    assert!(with.summary.cost > without.summary.cost);
    assert!((with.summary.production_cost - without.summary.production_cost).abs() < 1e-12);
    assert_eq!(with.summary.profiling_copies, 2);
    assert_eq!(with.summary.profiling.copies_dropped, 0);
    assert_eq!(with.summary.profiling.batches_deferred, 0);
    assert!(with.timeline.iter().any(|r| r.profiling_cpu > 0.0));
}

#[test]
fn profiling_gets_only_what_production_leaves() {
    // The default cluster: static + 25 % (30 cores, 120 GB) with static production: 6 cores
    // and 24 GB spare. Of the two candidates only the second (4 cores, 8 GB) fits.
    let rates = vec![20_000.0; 1800];
    let candidates: Vec<JobConfig> = vec![
        "p=12,slots=1,mem=4g,cpu=1,ckpt=10".parse().unwrap(),
        "p=8,slots=4,mem=4g,cpu=2,ckpt=30".parse().unwrap(),
    ];
    let mut script = Script {
        profile_at: Some(Duration::from_secs(100)),
        candidates,
        ..Script::default()
    };
    let run = go(&mut script, &rates, options(2, None));
    let s = &run.summary;
    assert_eq!(
        (s.cluster_cpu_cores, s.cluster_memory_mb),
        (30.0, 120.0 * 1024.0)
    );
    assert_eq!(s.profiling.copies_ordered, 2);
    assert_eq!(s.profiling_copies, 1);
    assert_eq!(s.profiling.copies_dropped, 1);
    assert_eq!(script.results.len(), 1);
    assert_eq!(script.results[0].2.len(), 1);
    assert_eq!(script.results[0].2[0].config, script.candidates[1]);
    let peak = run
        .timeline
        .iter()
        .map(|r| r.profiling_cpu + r.cpu_alloc)
        .fold(0.0, f64::max);
    assert!(peak <= 30.0 + 1e-9, "{peak}");
}

#[test]
fn failures_are_counted_and_every_one_recovers() {
    let rates = wave(3 * 3600, 8_000.0, 30_000.0);
    let run = go(&mut Fixed, &rates, options(1, Some(2700)));
    let s = &run.summary;
    assert_eq!(s.failures, 3);
    assert_eq!(s.recoveries_s.len(), 3);
    assert_eq!(s.recoveries_censored, 0);
    let truth = truth();
    let c = JobConfig::paper_default();
    assert!((s.downtime_failures_s - 3.0 * truth.failure_downtime_s(&c)).abs() < 1e-6);
    assert!(
        s.recoveries_s
            .iter()
            .all(|r| *r > truth.failure_downtime_s(&c))
    );
    assert!(s.seconds_over_latency.total as f64 >= 3.0 * truth.failure_downtime_s(&c).floor());
    // Static carries the rate: every second over the QoS is inside a failure recovery.
    assert_eq!(s.seconds_over_latency.steady, 0);
    assert_eq!(s.seconds_over_latency.change, 0);
    assert_eq!(
        s.seconds_over_latency.failure_recovery,
        s.seconds_over_latency.total
    );
    assert_eq!(s.percent_over_latency, 0.0);
    assert_eq!(s.cost, 1.0);
    assert_eq!(s.reconfigurations(), 0);
}

#[test]
fn rates_per_second_fill_gaps_with_the_previous_rate() {
    let trace = crate::trace::parse_rate_trace("timestamp|value\n10|5\n11|6\n14|9\n").unwrap();
    assert_eq!(rates_per_second(&trace), vec![5.0, 6.0, 6.0, 6.0, 9.0]);
}

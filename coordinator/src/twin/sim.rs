//! The simulation loop: replays a rate trace second by second through the [`Job`], injects
//! failures, runs profiling copies, and feeds a [`Policy`] exactly as the daemon will — one
//! [`JobTick`] per second, timeouts, outcomes — applying the actions it returns.
//!
//! Deterministic: virtual time, and two RNG streams seeded from `seed` (production measurement
//! noise; profiling measurements), so the production noise is the same whatever a policy does.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use super::job::{Job, JobEvent, Second};
use super::profiling::{Profiler, ProfilingTimes};
use super::report::{Recorder, Summary, TimelineRow};
use super::truth::{GroundTruth, standard_normal};
use crate::models::space::{JobConfig, SearchSpace};
use crate::models::surrogate::Qos;
use crate::policy::{
    Action, ChangeKind, JobPhase, JobTick, Policy, ProfilingRoom, ReconfigureOutcome,
};

/// The knobs of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimOptions {
    pub qos: Qos,
    /// A TaskManager of production dies every this many seconds (None: never).
    pub failures_every_s: Option<u64>,
    pub seed: u64,
    pub profiling: ProfilingTimes,
    /// Timeline window in seconds (0: no timeline).
    pub timeline_every_s: u64,
}

/// What is simulated: the job's truth, its search space, the rate of every second, and the
/// configuration production starts in (the static default).
#[derive(Debug, Clone, Copy)]
pub struct Scenario<'a> {
    pub truth: &'a GroundTruth,
    pub space: &'a SearchSpace,
    pub rates: &'a [f64],
    pub initial: JobConfig,
}

/// Everything worth writing down, in order; the `--decisions` file holds one per line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum SimEvent {
    Action {
        t_s: f64,
        action: Box<Action>,
    },
    Reconfigured {
        t_s: f64,
        kind: Option<ChangeKind>,
        outcome: ReconfigureOutcome,
    },
    Profiled {
        t_s: f64,
        batch: u64,
        results: usize,
    },
    Failure {
        t_s: f64,
    },
    Recovered {
        t_s: f64,
        failed_at_s: f64,
        recovery_s: f64,
        censored: bool,
    },
}

#[derive(Debug, Clone)]
pub struct SimRun {
    pub summary: Summary,
    pub timeline: Vec<TimelineRow>,
    pub events: Vec<SimEvent>,
}

/// Offsets the profiling stream so it never replays the production stream's draws.
const PROFILING_STREAM: u64 = 0x9e37_79b9_7f4a_7c15;

/// Runs `policy` over the scenario.
pub fn simulate(policy: &mut dyn Policy, scenario: Scenario<'_>, options: SimOptions) -> SimRun {
    let truth = scenario.truth;
    let mut job = Job::new(truth.clone(), scenario.space.clone(), scenario.initial);
    let cluster = truth.cluster.capacity(&scenario.initial);
    let mut profiler = Profiler::new(options.profiling, cluster);
    let mut recorder = Recorder::new(options.qos, options.timeline_every_s);
    let mut noise = StdRng::seed_from_u64(options.seed);
    let mut profiling_rng = StdRng::seed_from_u64(options.seed ^ PROFILING_STREAM);
    let mut events = Vec::new();
    let mut job_events = Vec::new();
    let mut last: Option<Second> = None;

    for (t, &rate) in scenario.rates.iter().enumerate() {
        let t = t as u64;
        if let Some(every) = options.failures_every_s
            && every > 0
            && t > 0
            && t.is_multiple_of(every)
        {
            recorder.failure();
            events.push(SimEvent::Failure { t_s: t as f64 });
            job.fail(t as f64, &mut job_events);
        }
        let second = job.step(t, rate, &mut job_events);
        let end = t as f64 + 1.0;
        // Production always wins: it holds what it used this second or what its
        // configuration needs, whichever is more; the copies get the rest.
        let steady = job.config();
        let production = (
            second.cpu_alloc.max(steady.total_cpu_cores()),
            second.memory_alloc_mb.max(steady.total_memory_mb()),
        );
        profiler.tick(
            t as f64,
            production,
            truth,
            scenario.space,
            &mut profiling_rng,
        );
        let profiling = profiler.allocated(t as f64, end);
        recorder.second(&second, profiling, policy.forecast());
        let now = Duration::from_secs(t + 1);

        policy.handle_profiling_room(
            now,
            ProfilingRoom {
                cpu_cores: (cluster.0 - production.0).max(0.0),
                memory_mb: (cluster.1 - production.1).max(0.0),
            },
        );
        policy.handle_observation(now, &tick(&second, truth, &mut noise));
        for event in job_events.drain(..) {
            match event {
                JobEvent::Reconfigured { at, kind, outcome } => {
                    recorder.changed(kind, &outcome);
                    events.push(SimEvent::Reconfigured {
                        t_s: at,
                        kind: Some(kind),
                        outcome,
                    });
                    policy.handle_reconfigured(now, &outcome);
                }
                JobEvent::Recovered {
                    failed_at,
                    recovery_s,
                    censored,
                } => {
                    recorder.recovered(recovery_s, censored);
                    events.push(SimEvent::Recovered {
                        t_s: failed_at + recovery_s,
                        failed_at_s: failed_at,
                        recovery_s,
                        censored,
                    });
                }
            }
        }
        for batch in profiler.finished(end) {
            events.push(SimEvent::Profiled {
                t_s: batch.at,
                batch: batch.batch,
                results: batch.results.len(),
            });
            policy.handle_profile_results(now, batch.batch, &batch.results);
        }
        if policy
            .poll_timeout()
            .is_some_and(|deadline| deadline <= now)
        {
            policy.handle_timeout(now);
        }
        while let Some(action) = policy.poll_action() {
            events.push(SimEvent::Action {
                t_s: end,
                action: Box::new(action.clone()),
            });
            match action {
                Action::Reconfigure { to, kind, .. } => match job.reconfigure(end, to) {
                    Ok(actual) => {
                        if actual != kind {
                            tracing::debug!(?kind, ?actual, %to, "policy misjudged the kind of change");
                        }
                    }
                    Err(outcome) => {
                        if !outcome.succeeded {
                            recorder.refused();
                        }
                        events.push(SimEvent::Reconfigured {
                            t_s: end,
                            kind: None,
                            outcome,
                        });
                        policy.handle_reconfigured(now, &outcome);
                    }
                },
                Action::Profile {
                    batch,
                    candidates,
                    rate,
                    ..
                } => profiler.order(end, batch, &candidates, rate),
            }
        }
        last = Some(second);
    }
    let summary = recorder.finish(
        policy.name(),
        scenario.initial,
        profiler.stats,
        cluster,
        last.as_ref(),
    );
    SimRun {
        summary,
        timeline: std::mem::take(&mut recorder.timeline.rows),
        events,
    }
}

/// What production's metrics say about a second: the truth plus measurement noise.
fn tick(second: &Second, truth: &GroundTruth, rng: &mut StdRng) -> JobTick {
    let running = second.running_fraction > 0.0;
    let processed_rate = if running {
        second.processed / second.running_fraction
    } else {
        0.0
    };
    let capacity = second.capacity.max(f64::MIN_POSITIVE);
    let outcomes = truth.outcomes(&second.config, processed_rate.min(capacity));
    let mut noisy = |value: f64| value * (truth.noise * standard_normal(rng)).exp();
    let cpu_cores = noisy(outcomes.cpu_cores);
    let memory_mb = noisy(outcomes.memory_mb);
    let latency = noisy(second.latency_ms);
    let busy = (processed_rate / capacity).min(1.0) + truth.busy_noise * standard_normal(rng);
    JobTick {
        phase: if running {
            JobPhase::Running
        } else {
            JobPhase::Down
        },
        config: second.config,
        rate: second.rate,
        busy_fraction: running.then_some(busy.clamp(0.0, 1.0)),
        latency_p95_ms: running.then_some(latency),
        backlog: second.backlog,
        cpu_cores,
        memory_mb,
    }
}

/// Dense per-second rates from a trace (gaps hold the previous rate), starting at its first
/// timestamp.
pub fn rates_per_second(trace: &crate::trace::RateTrace) -> Vec<f64> {
    let Some(first) = trace.points.first() else {
        return Vec::new();
    };
    let mut rates = Vec::with_capacity(trace.span_s() as usize + 1);
    for point in &trace.points {
        let offset = (point.t_s - first.t_s) as usize;
        let previous = rates.last().copied().unwrap_or(point.rate);
        rates.resize(offset, previous);
        rates.push(point.rate);
    }
    rates
}

#[cfg(test)]
#[path = "sim_tests.rs"]
mod tests;

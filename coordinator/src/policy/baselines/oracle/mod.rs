//! `oracle`: the offline optimum with perfect knowledge — the true curves, the rate of every
//! future second and the failure schedule of the simulated job. At its first observation it
//! solves a dynamic program over decision epochs × candidate configurations × changes used
//! (`dp.rs` on the instance of `instance.rs`): the cheapest schedule (allocated cost plus what
//! each change really costs) that holds, in every epoch, a configuration truly meeting both
//! QoS bounds at that epoch's maximum rate, with at most `max_changes` changes whose downtime
//! and catch-up disrupt at most `max_disruption_share` of the run — the same limits the
//! benchmark's targets set for Demeter. Then it replays that schedule, issuing each change
//! ahead of its epoch so it is done in time. The cost lower bound for policies held to those
//! limits (up to the DP's epoch granularity and the λ search's duality gap).

mod candidates;
mod dp;
mod foresight;
mod instance;

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::dp::{Hold, Move, Plan, Problem, evaluate, solve, solve_within};
pub use self::foresight::Foresight;
pub use self::instance::{Instance, Timing};
use crate::models::observations::Observation;
use crate::models::space::JobConfig;
use crate::policy::{
    Action, CandidateNumbers, ChangeKind, Decision, ForecastSummary, JobTick, Policy,
    ProfilingRoom, Reason, ReconfigureOutcome,
};

/// Reconfigurations the benchmark's target allows Demeter in an 18-hour run.
pub const CHANGES_PER_18_H: f64 = 12.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OracleSettings {
    /// Seconds per decision epoch (Demeter's paper reconfigures at most every 10 min).
    pub epoch_s: u64,
    /// Most changes in the run; None: 12 per 18 hours, scaled to the run's length (at least 1).
    pub max_changes: Option<u32>,
    /// Most seconds the changes may disrupt (downtime + catch-up: over the latency QoS), as a
    /// share of the run: 0.015, the seconds over the latency QoS the target allows a policy.
    pub max_disruption_share: f64,
    /// The cheapest configurations meeting the QoS kept per epoch (before widening by
    /// in-place siblings); more is slower and rarely cheaper.
    pub candidates_per_epoch: usize,
}

impl Default for OracleSettings {
    fn default() -> Self {
        OracleSettings {
            epoch_s: 600,
            max_changes: None,
            max_disruption_share: 0.015,
            candidates_per_epoch: 8,
        }
    }
}

impl OracleSettings {
    /// The change budget for a run of `seconds`.
    pub fn change_budget(&self, seconds: usize) -> u32 {
        self.max_changes.unwrap_or_else(|| {
            (CHANGES_PER_18_H * seconds as f64 / (18.0 * 3600.0))
                .round()
                .max(1.0) as u32
        })
    }
}

/// One change of the schedule, ready to be issued.
#[derive(Debug, Clone)]
struct Scheduled {
    issue_s: u64,
    to: JobConfig,
    reason: String,
    chosen: CandidateNumbers,
    best_rejected: Option<(CandidateNumbers, String)>,
}

#[derive(Debug, Clone)]
pub struct Oracle {
    settings: OracleSettings,
    world: Foresight,
    /// Solved at the first observation, when the starting configuration is known.
    schedule: Option<VecDeque<Scheduled>>,
    /// Every epoch's true maximum rate, for the timeline's "forecast".
    epoch_rates: Vec<f64>,
    plan: Option<Plan>,
    current: Option<JobConfig>,
    changing: bool,
    wake: Option<Duration>,
    last_forecast: Option<ForecastSummary>,
    actions: VecDeque<Action>,
}

impl Oracle {
    pub fn new(world: Foresight, settings: OracleSettings) -> Self {
        Oracle {
            settings,
            world,
            schedule: None,
            epoch_rates: Vec::new(),
            plan: None,
            current: None,
            changing: false,
            wake: None,
            last_forecast: None,
            actions: VecDeque::new(),
        }
    }

    /// Normalised cost per second: ½ · CPU + ½ · memory relative to the reference.
    pub fn cost(&self, config: &JobConfig) -> f64 {
        self.world.cost(config)
    }

    /// The solved plan (after the first observation).
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    fn numbers(&self, config: &JobConfig, rate: f64) -> CandidateNumbers {
        let truth = self.world.truth.outcomes(config, rate);
        CandidateNumbers {
            config: *config,
            rate,
            p_feasible: if self.world.feasible(config, rate) {
                1.0
            } else {
                0.0
            },
            latency_p95_ms: truth.latency_p95_ms,
            recovery_s: truth.recovery_s,
            cpu_cores: config.total_cpu_cores(),
            memory_mb: config.total_memory_mb(),
        }
    }

    /// Solves the DP from `initial` and turns its changes into a schedule.
    fn prepare(&mut self, initial: JobConfig) {
        let seconds = self.world.rates.len();
        let budget = self.settings.change_budget(seconds);
        let max_disruption_s = self.settings.max_disruption_share * seconds as f64;
        let instance = Instance::new(&self.world, &self.settings, initial);
        let plan = solve_within(&instance, budget, max_disruption_s);
        tracing::info!(
            epochs = plan.configs.len(),
            candidates = instance.configs.len(),
            changes = plan.changes.len(),
            budget,
            disruption_s = plan.disruption_s,
            max_disruption_s,
            violations = plan.violations,
            lambda = plan.lambda,
            "oracle schedule solved"
        );
        let mut schedule = VecDeque::new();
        let all: Vec<JobConfig> = self.world.space.candidates();
        for (i, &epoch) in plan.changes.iter().enumerate() {
            let to_index = plan.configs[epoch];
            let from_index = if epoch == 0 {
                instance.configs.binary_search(&initial).unwrap_or(0)
            } else {
                plan.configs[epoch - 1]
            };
            let Some(timing) = instance.timing(epoch, from_index, to_index) else {
                continue;
            };
            let to = instance.configs[to_index];
            let until = plan
                .changes
                .get(i + 1)
                .copied()
                .unwrap_or(plan.configs.len());
            let rate = instance.rates()[epoch..until]
                .iter()
                .copied()
                .fold(timing.rate, f64::max);
            let cost = self.world.cost(&to);
            let best_rejected = all
                .iter()
                .filter(|c| self.world.cost(c) < cost && !self.world.feasible(c, rate))
                .min_by(|a, b| self.world.cost(a).total_cmp(&self.world.cost(b)))
                .map(|c| {
                    let n = self.numbers(c, rate);
                    let why = if n.latency_p95_ms > self.world.qos.latency_p95_ms {
                        format!("p95 latency {:.0} ms", n.latency_p95_ms)
                    } else {
                        format!("recovery {:.0} s", n.recovery_s)
                    };
                    (n, format!("violates the QoS at {rate:.0}/s: {why}"))
                });
            let epoch_s = instance.epoch_s();
            schedule.push_back(Scheduled {
                issue_s: timing.issue_s,
                to,
                reason: format!(
                    "oracle: offline optimum ({} of {budget} changes, {:.0} of {max_disruption_s:.0} s disrupted): \
                     hold until {} s, where the true max rate is {rate:.0}/s; \
                     this change takes {:.0} s down + {:.0} s catch-up",
                    plan.changes.len(),
                    plan.disruption_s,
                    until as u64 * epoch_s,
                    timing.downtime_s,
                    timing.catchup_s,
                ),
                chosen: self.numbers(&to, rate),
                best_rejected,
            });
        }
        self.epoch_rates = instance.rates().to_vec();
        self.wake = schedule.front().map(|s| Duration::from_secs(s.issue_s));
        self.schedule = Some(schedule);
        self.plan = Some(plan);
    }

    fn issue(&mut self, now: Duration) {
        let Some(current) = self.current else {
            return;
        };
        let Some(schedule) = self.schedule.as_mut() else {
            return;
        };
        let Some(next) = schedule.pop_front() else {
            self.wake = None;
            return;
        };
        self.wake = schedule
            .front()
            .map(|s| Duration::from_secs(s.issue_s).max(now + RETRY));
        if next.to == current {
            return;
        }
        self.changing = true;
        self.actions.push_back(Action::Reconfigure {
            to: next.to,
            kind: ChangeKind::between(&current, &next.to),
            decision: Decision {
                at: now,
                reason: Reason::Rule(next.reason),
                forecast: self.last_forecast,
                chosen: Some(next.chosen),
                best_rejected: next.best_rejected,
            },
        });
    }
}

impl Policy for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn handle_observation(&mut self, now: Duration, tick: &JobTick) {
        if self.schedule.is_none() {
            self.current = Some(tick.config);
            self.prepare(tick.config);
        }
        let epoch_s = self.settings.epoch_s.max(1);
        let epoch = (now.as_secs().saturating_sub(1) / epoch_s) as usize;
        self.last_forecast = self.epoch_rates.get(epoch).map(|&rate| ForecastSummary {
            horizon_s: u32::try_from(epoch_s).unwrap_or(u32::MAX),
            point_max: rate,
            upper_max: rate,
        });
    }

    fn handle_profiling_room(&mut self, _now: Duration, _room: ProfilingRoom) {}

    fn handle_profile_results(&mut self, _now: Duration, _batch: u64, _results: &[Observation]) {}

    fn handle_reconfigured(&mut self, _now: Duration, outcome: &ReconfigureOutcome) {
        self.changing = false;
        self.current = Some(outcome.running);
    }

    fn handle_timeout(&mut self, now: Duration) {
        if self.changing {
            // The previous change is still in flight (only when two fall close together).
            self.wake = Some(now + RETRY);
            return;
        }
        self.issue(now);
    }

    fn poll_timeout(&self) -> Option<Duration> {
        self.wake
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn forecast(&self) -> Option<ForecastSummary> {
        self.last_forecast
    }
}

/// How soon a change held up by another one in flight is tried again.
const RETRY: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests;

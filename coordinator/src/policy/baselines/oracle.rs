//! `oracle`: knows the whole future rate and the true curves of the simulated job. Every epoch
//! it picks the cheapest configuration of the search space that truly meets the QoS (latency
//! and recovery) at the true maximum rate until the next epoch plus the time the change takes,
//! and moves there when it must (the current one would violate the QoS) or when the saving over
//! the epoch pays for the change (resources spent during its downtime and catch-up, when the
//! job delivers nothing). A lower bound for cost — not a perfect latency score: changes still
//! cost downtime.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::models::observations::Observation;
use crate::models::space::{JobConfig, SearchSpace};
use crate::models::surrogate::Qos;
use crate::policy::{
    Action, CandidateNumbers, ChangeKind, Decision, ForecastSummary, JobPhase, JobTick, Policy,
    Reason, ReconfigureOutcome,
};
use crate::twin::change;
use crate::twin::truth::GroundTruth;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OracleSettings {
    /// Seconds between decisions (Demeter's paper reconfigures at most every 10 min).
    pub epoch_s: u64,
}

impl Default for OracleSettings {
    fn default() -> Self {
        OracleSettings { epoch_s: 600 }
    }
}

#[derive(Debug, Clone)]
pub struct Oracle {
    settings: OracleSettings,
    truth: GroundTruth,
    space: SearchSpace,
    qos: Qos,
    /// The rate of every second from the start of the run.
    rates: Vec<f64>,
    /// The cost reference (½ CPU + ½ memory relative to it).
    reference: JobConfig,
    candidates: Vec<JobConfig>,
    current: Option<JobConfig>,
    changing: bool,
    /// Down, or catching up with a shrinking backlog: a change now would stack its downtime on
    /// the recovery.
    recovering: bool,
    /// Behind (a backlog) but not draining it: overloaded, unless it just restarted.
    behind: bool,
    previous_backlog: f64,
    /// Since when a decision waits for a recovery (bounded: an overloaded job never drains).
    postponed_since: Option<Duration>,
    next_decision: Duration,
    last_forecast: Option<ForecastSummary>,
    actions: VecDeque<Action>,
}

impl Oracle {
    pub fn new(
        truth: GroundTruth,
        space: SearchSpace,
        qos: Qos,
        rates: Vec<f64>,
        reference: JobConfig,
        settings: OracleSettings,
    ) -> Self {
        let candidates = space
            .candidates()
            .into_iter()
            .filter(|c| truth.can_run(c))
            .collect();
        Oracle {
            settings,
            truth,
            space,
            qos,
            rates,
            reference,
            candidates,
            current: None,
            changing: false,
            recovering: false,
            behind: false,
            previous_backlog: 0.0,
            postponed_since: None,
            next_decision: Duration::ZERO,
            last_forecast: None,
            actions: VecDeque::new(),
        }
    }

    /// Normalised cost per second: ½ · CPU + ½ · memory relative to the reference.
    pub fn cost(&self, config: &JobConfig) -> f64 {
        0.5 * config.total_cpu_cores() / self.reference.total_cpu_cores().max(1e-9)
            + 0.5 * config.total_memory_mb() / self.reference.total_memory_mb().max(1e-9)
    }

    fn max_rate(&self, from: usize, seconds: usize) -> f64 {
        let end = (from + seconds.max(1)).min(self.rates.len());
        self.rates
            .get(from.min(end)..end)
            .unwrap_or(&[])
            .iter()
            .copied()
            .fold(0.0, f64::max)
    }

    fn numbers(&self, config: &JobConfig, rate: f64, feasible: bool) -> CandidateNumbers {
        let truth = self.truth.outcomes(config, rate);
        CandidateNumbers {
            config: *config,
            rate,
            p_feasible: if feasible { 1.0 } else { 0.0 },
            latency_p95_ms: truth.latency_p95_ms,
            recovery_s: truth.recovery_s,
            cpu_cores: config.total_cpu_cores(),
            memory_mb: config.total_memory_mb(),
        }
    }

    fn violation(&self, config: &JobConfig, rate: f64) -> Option<String> {
        let truth = self.truth.outcomes(config, rate);
        if truth.latency_p95_ms > self.qos.latency_p95_ms {
            Some(format!("p95 latency {:.0} ms", truth.latency_p95_ms))
        } else if truth.recovery_s > self.qos.recovery_s {
            Some(format!("recovery {:.0} s", truth.recovery_s))
        } else {
            None
        }
    }

    fn decide(&mut self, now: Duration) {
        let Some(current) = self.current else {
            return;
        };
        let t = now.as_secs() as usize;
        let epoch = self.settings.epoch_s as usize;
        // Horizon per candidate: until the next decision plus the change's own downtime.
        let mut max_rates: HashMap<usize, f64> = HashMap::new();
        let mut best: Option<(f64, f64, JobConfig, f64)> = None; // (cost, downtime, config, rate)
        let mut cheaper_rejected: Option<(f64, JobConfig, f64)> = None;
        for c in &self.candidates {
            let downtime = if *c == current {
                0.0
            } else {
                change::downtime_s(&self.truth, &self.space, current, *c)
            };
            let horizon = epoch + downtime.ceil() as usize;
            let rate = *max_rates
                .entry(horizon)
                .or_insert_with(|| self.max_rate(t, horizon));
            let cost = self.cost(c);
            if self.violation(c, rate).is_some() {
                if cheaper_rejected.is_none_or(|(k, ..)| cost < k) {
                    cheaper_rejected = Some((cost, *c, rate));
                }
                continue;
            }
            let better = best.is_none_or(|(k, d, b, _)| {
                cost < k - 1e-12
                    || (cost <= k + 1e-12 && (*c == current || (b != current && downtime < d)))
            });
            if better {
                best = Some((cost, downtime, *c, rate));
            }
        }
        let window = max_rates
            .get(&epoch)
            .copied()
            .unwrap_or_else(|| self.max_rate(t, epoch));
        self.last_forecast = Some(ForecastSummary {
            horizon_s: epoch as u32,
            point_max: window,
            upper_max: window,
        });
        let current_ok = self.violation(&current, window).is_none();
        let (to, rate, verdict) = match best {
            Some((_, _, to, _)) if to == current => return,
            Some((cost, downtime, to, rate)) => {
                if current_ok && !self.pays_off(current, to, cost, downtime, t) {
                    return;
                }
                let verdict = if current_ok {
                    "cheaper"
                } else {
                    "current violates the QoS"
                };
                (to, rate, verdict)
            }
            None => {
                // Nothing meets the QoS: the most capable configuration limits the damage.
                let Some(to) = self
                    .candidates
                    .iter()
                    .copied()
                    .max_by(|a, b| self.truth.capacity(a).total_cmp(&self.truth.capacity(b)))
                else {
                    return;
                };
                if to == current {
                    return;
                }
                (to, window, "nothing meets the QoS; most capable")
            }
        };
        let best_rejected = cheaper_rejected
            .filter(|(cost, ..)| *cost < self.cost(&to))
            .map(|(_, c, r)| {
                let why = self.violation(&c, r).unwrap_or_default();
                (
                    self.numbers(&c, r, false),
                    format!("violates the QoS: {why}"),
                )
            });
        self.changing = true;
        self.actions.push_back(Action::Reconfigure {
            to,
            kind: ChangeKind::between(&current, &to),
            decision: Decision {
                at: now,
                reason: Reason::Rule(format!(
                    "oracle ({verdict}): cheapest meeting the QoS at the true max rate {rate:.0}/s"
                )),
                forecast: self.last_forecast,
                chosen: Some(self.numbers(&to, rate, true)),
                best_rejected,
            },
        });
    }

    /// Whether the saving over one epoch exceeds what the change wastes: the new
    /// configuration's cost while the job is down and catching up.
    fn pays_off(
        &self,
        current: JobConfig,
        to: JobConfig,
        cost: f64,
        downtime: f64,
        t: usize,
    ) -> bool {
        let rate = self.rates.get(t).copied().unwrap_or(0.0);
        let spare = self.truth.capacity(&to) * self.truth.catchup_efficiency - rate;
        if spare <= 0.0 {
            return false;
        }
        let catch_up = rate * downtime / spare;
        let saving = (self.cost(&current) - cost) * self.settings.epoch_s as f64;
        saving > cost * (downtime + catch_up)
    }
}

impl Policy for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn handle_observation(&mut self, _now: Duration, tick: &JobTick) {
        if self.current.is_none() {
            self.current = Some(tick.config);
        }
        let draining = tick.backlog > 0.0 && tick.backlog < self.previous_backlog;
        self.recovering = tick.phase == JobPhase::Down || draining;
        self.behind = tick.backlog > 0.0 && !draining;
        self.previous_backlog = tick.backlog;
    }

    fn handle_profile_results(&mut self, _now: Duration, _batch: u64, _results: &[Observation]) {}

    fn handle_reconfigured(&mut self, _now: Duration, outcome: &ReconfigureOutcome) {
        self.changing = false;
        self.current = Some(outcome.running);
    }

    fn handle_timeout(&mut self, now: Duration) {
        let since = *self.postponed_since.get_or_insert(now);
        let waited_enough = now.saturating_sub(since).as_secs_f64() >= self.qos.recovery_s;
        if self.changing || self.recovering || (self.behind && !waited_enough) {
            // Decide once the job is back to steady processing — or, when a backlog has not
            // shrunk for the recovery QoS, because it is overloaded: a change is due anyway.
            self.next_decision = now + RETRY;
            return;
        }
        self.postponed_since = None;
        self.next_decision = now + Duration::from_secs(self.settings.epoch_s.max(1));
        self.decide(now);
    }

    fn poll_timeout(&self) -> Option<Duration> {
        Some(self.next_decision)
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn forecast(&self) -> Option<ForecastSummary> {
        self.last_forecast
    }
}

/// How soon a decision postponed by a change or a recovery is tried again.
const RETRY: Duration = Duration::from_secs(10);

#[cfg(test)]
#[path = "oracle_tests.rs"]
mod tests;

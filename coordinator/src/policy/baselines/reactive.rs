//! `reactive`: the rule of Flink's autoscaler (flink-kubernetes-operator, `job.autoscaler.*`),
//! for one bottleneck vertex and parallelism only — what users get today.
//!
//! - Metrics are collected only while the job runs, from `stabilization.interval` after a
//!   change, and a decision needs a full `metrics.window`.
//! - True processing rate = records processed / busy time over the window (records processed =
//!   offered rate minus backlog growth, so it is right when backpressured too).
//! - Target capacity = input rate / target utilisation + catch-up of the current lag and of the
//!   lag a restart builds (`(lag + rate · restart.time) / catch-up.duration`).
//! - Scale up at once when the true rate is below the capacity needed at
//!   `target + boundary` utilisation; scale down when above the capacity needed at
//!   `target − boundary`, but only once the scale-down was wanted for a whole
//!   `scale-down.interval` (the largest parallelism asked for meanwhile wins; a recommendation
//!   inside the band cancels it).
//! - New parallelism = ceil(p · target capacity / true rate), assuming linear scaling, rounded
//!   up to the search space's parallelism grid. Other dimensions stay as deployed, so every
//!   change is in place.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::models::observations::Observation;
use crate::models::space::{JobConfig, SearchSpace};
use crate::policy::{
    Action, ChangeKind, Decision, JobPhase, JobTick, Policy, ProfilingRoom, Reason,
    ReconfigureOutcome,
};

/// The autoscaler's knobs, with its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReactiveSettings {
    /// `job.autoscaler.target.utilization`.
    pub target_utilization: f64,
    /// `job.autoscaler.target.utilization.boundary`: act only outside target ± boundary.
    pub utilization_boundary: f64,
    /// `job.autoscaler.metrics.window`.
    pub metrics_window_s: u64,
    /// `job.autoscaler.stabilization.interval`.
    pub stabilization_s: u64,
    /// `job.autoscaler.scale-down.interval`.
    pub scale_down_interval_s: u64,
    /// `job.autoscaler.catch-up.duration`.
    pub catch_up_duration_s: u64,
    /// `job.autoscaler.restart.time`.
    pub restart_time_s: u64,
    /// How often the rule is evaluated (the operator's reconcile interval).
    pub evaluation_interval_s: u64,
}

impl Default for ReactiveSettings {
    fn default() -> Self {
        ReactiveSettings {
            target_utilization: 0.7,
            utilization_boundary: 0.3,
            metrics_window_s: 15 * 60,
            stabilization_s: 5 * 60,
            scale_down_interval_s: 60 * 60,
            catch_up_duration_s: 30 * 60,
            restart_time_s: 5 * 60,
            evaluation_interval_s: 60,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    rate: f64,
    processed: f64,
    busy: f64,
}

#[derive(Debug, Clone)]
pub struct Reactive {
    settings: ReactiveSettings,
    space: SearchSpace,
    current: Option<JobConfig>,
    window: VecDeque<Sample>,
    sums: (f64, f64, f64),
    previous_backlog: Option<f64>,
    backlog: f64,
    collect_from: Duration,
    next_evaluation: Duration,
    changing: bool,
    /// A scale-down wanted since, and the largest parallelism asked for meanwhile.
    pending_down: Option<(Duration, u32)>,
    actions: VecDeque<Action>,
}

impl Reactive {
    pub fn new(space: SearchSpace, settings: ReactiveSettings) -> Self {
        Reactive {
            settings,
            space,
            current: None,
            window: VecDeque::new(),
            sums: (0.0, 0.0, 0.0),
            previous_backlog: None,
            backlog: 0.0,
            collect_from: Duration::ZERO,
            next_evaluation: Duration::from_secs(settings.evaluation_interval_s),
            changing: false,
            pending_down: None,
            actions: VecDeque::new(),
        }
    }

    fn clear_window(&mut self) {
        self.window.clear();
        self.sums = (0.0, 0.0, 0.0);
    }

    /// The smallest parallelism of the grid at least `wanted` (the largest if none is).
    fn snap(&self, wanted: f64) -> u32 {
        let mut grid = self.space.parallelism.clone();
        grid.sort_unstable();
        grid.iter()
            .copied()
            .find(|p| f64::from(*p) >= wanted)
            .or(grid.last().copied())
            .unwrap_or(1)
    }

    fn evaluate(&mut self, now: Duration) {
        let Some(current) = self.current else {
            return;
        };
        let full = self.window.len() as u64 >= self.settings.metrics_window_s;
        let (rate_sum, processed_sum, busy_sum) = self.sums;
        if self.changing || !full || busy_sum <= 0.0 {
            return;
        }
        let n = self.window.len() as f64;
        let rate = rate_sum / n;
        let true_rate = processed_sum / busy_sum;
        let s = &self.settings;
        let catch_up =
            (self.backlog + rate * s.restart_time_s as f64) / (s.catch_up_duration_s.max(1) as f64);
        let needed = |utilization: f64| rate / utilization.max(1e-3) + catch_up;
        let upper = (s.target_utilization + s.utilization_boundary).min(1.0);
        let lower = (s.target_utilization - s.utilization_boundary).max(0.01);
        let p = current.parallelism;
        let wanted = self.snap(f64::from(p) * needed(s.target_utilization) / true_rate);
        let why = |verdict: &str| {
            format!(
                "{verdict}: utilisation {:.2} (band {lower:.2}–{upper:.2}), true rate {true_rate:.0}/s, \
                 input {rate:.0}/s, lag {:.0}",
                needed(1.0) / true_rate,
                self.backlog
            )
        };
        if true_rate < needed(upper) {
            self.pending_down = None;
            if wanted > p {
                let reason = why("scale up");
                self.act(now, current, wanted, reason);
            }
        } else if true_rate > needed(lower) && wanted < p {
            let (since, largest) = self.pending_down.unwrap_or((now, wanted));
            let largest = largest.max(wanted);
            if now.saturating_sub(since) >= Duration::from_secs(s.scale_down_interval_s) {
                self.pending_down = None;
                let reason = why("scale down after the scale-down interval");
                self.act(now, current, largest, reason);
            } else {
                self.pending_down = Some((since, largest));
            }
        } else {
            self.pending_down = None;
        }
    }

    fn act(&mut self, now: Duration, current: JobConfig, parallelism: u32, reason: String) {
        let to = JobConfig {
            parallelism,
            ..current
        };
        if to == current || !self.space.is_valid(&to) {
            return;
        }
        self.changing = true;
        self.actions.push_back(Action::Reconfigure {
            to,
            kind: ChangeKind::between(&current, &to),
            decision: Decision {
                at: now,
                reason: Reason::Rule(reason),
                forecast: None,
                chosen: None,
                best_rejected: None,
            },
        });
    }
}

impl Policy for Reactive {
    fn name(&self) -> &str {
        "reactive"
    }

    fn handle_observation(&mut self, now: Duration, tick: &JobTick) {
        if self.current.is_none() {
            self.current = Some(tick.config);
        }
        let previous = self.previous_backlog.replace(tick.backlog);
        self.backlog = tick.backlog;
        let (JobPhase::Running, Some(busy), Some(previous)) =
            (tick.phase, tick.busy_fraction, previous)
        else {
            return;
        };
        if self.changing || now < self.collect_from {
            return;
        }
        let processed = (tick.rate + previous - tick.backlog).max(0.0);
        let sample = Sample {
            rate: tick.rate,
            processed,
            busy,
        };
        self.window.push_back(sample);
        self.sums.0 += sample.rate;
        self.sums.1 += sample.processed;
        self.sums.2 += sample.busy;
        while self.window.len() as u64 > self.settings.metrics_window_s {
            if let Some(old) = self.window.pop_front() {
                self.sums.0 -= old.rate;
                self.sums.1 -= old.processed;
                self.sums.2 -= old.busy;
            }
        }
    }

    fn handle_profiling_room(&mut self, _now: Duration, _room: ProfilingRoom) {}

    fn handle_profile_results(&mut self, _now: Duration, _batch: u64, _results: &[Observation]) {}

    fn handle_reconfigured(&mut self, now: Duration, outcome: &ReconfigureOutcome) {
        self.changing = false;
        self.current = Some(outcome.running);
        self.pending_down = None;
        self.clear_window();
        self.collect_from = now + Duration::from_secs(self.settings.stabilization_s);
    }

    fn handle_timeout(&mut self, now: Duration) {
        self.next_evaluation = now + Duration::from_secs(self.settings.evaluation_interval_s);
        self.evaluate(now);
    }

    fn poll_timeout(&self) -> Option<Duration> {
        Some(self.next_evaluation)
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }
}

#[cfg(test)]
#[path = "reactive_tests.rs"]
mod tests;

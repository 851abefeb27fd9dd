//! What a simulated run amounts to: the summary (resources, QoS, recoveries, changes) and the
//! timeline (`timeline.rs`), accumulated second by second by [`Recorder`].

use serde::{Deserialize, Serialize};

use super::job::{Disruption, Second, SimPhase};
use super::profiling::{ProfilingStats, Resources};
pub use super::timeline::{Timeline, TimelineRow};
use crate::models::space::JobConfig;
use crate::models::surrogate::Qos;
use crate::policy::{ChangeKind, ForecastSummary, ReconfigureOutcome};

/// Resource use split by who used it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub production: f64,
    pub profiling: f64,
    pub total: f64,
}

/// Reconfigurations by how they went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    pub in_place: u64,
    pub full_restart: u64,
    /// Changes whose configuration could not run and was rolled back (also counted by kind).
    pub rolled_back: u64,
    /// Requests refused because another change was in flight (or a no-op).
    pub refused: u64,
}

/// Seconds whose true p95 latency exceeded the QoS, split by cause. The latency target is
/// checked on `steady + change` (see [`Summary::percent_over_latency`]): failure recoveries are
/// the recovery QoS's business, and every policy suffers the same injected failures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverLatency {
    /// Outside failure recoveries and changes: the configuration did not carry the rate.
    pub steady: u64,
    /// Inside a failure's recovery (failure → backlog drained), at most the recovery QoS after
    /// the failure; a recovery that runs longer is the configuration's fault and its later
    /// seconds count as `steady`.
    pub failure_recovery: u64,
    /// Inside a reconfiguration: from its start until the backlog it left is drained
    /// (downtime + catch-up), also when a failure recovery overlaps it.
    pub change: u64,
    pub total: u64,
}

/// Wall-clock time spent inside the policy (measured by the caller, never by the twin).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionTime {
    pub calls: u64,
    pub total_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub policy: String,
    pub seconds: u64,
    pub qos: Qos,
    /// The reference every ratio is relative to, and what it would have used.
    pub static_config: JobConfig,
    pub static_cpu_core_hours: f64,
    pub static_memory_gb_hours: f64,
    pub cpu_core_hours: Usage,
    pub memory_gb_hours: Usage,
    /// Total (profiling included) relative to the static configuration.
    pub cpu_ratio: f64,
    pub memory_ratio: f64,
    /// ½ · CPU ratio + ½ · memory ratio, profiling included.
    pub cost: f64,
    /// The same for production only.
    pub production_cost: f64,
    /// Seconds whose true p95 latency exceeded the QoS, by cause.
    pub seconds_over_latency: OverLatency,
    /// THE latency figure targets are checked against: seconds over the latency QoS outside
    /// failure recoveries (steady + change), in percent of the seconds outside failure
    /// recoveries.
    pub percent_over_latency: f64,
    /// All seconds over the latency QoS (failure recoveries included), in percent of all seconds.
    pub percent_over_latency_incl_failures: f64,
    /// Seconds inside failure recoveries (capped at the recovery QoS per failure; see
    /// [`OverLatency::failure_recovery`]) and inside changes (downtime + catch-up).
    pub seconds_in_failure_recovery: u64,
    pub seconds_in_changes: u64,
    pub failures: u64,
    /// Failure → backlog drained, seconds, in order.
    pub recoveries_s: Vec<f64>,
    /// Recoveries cut short by the next failure (included above with their partial length).
    pub recoveries_censored: u64,
    pub recoveries_over_qos: u64,
    pub changes: Changes,
    /// Seconds with nothing processed, by cause.
    pub downtime_failures_s: f64,
    pub downtime_changes_s: f64,
    /// Profiling batches and copies started.
    pub profiling_batches: u64,
    pub profiling_copies: u64,
    /// What happened to the profiling ordered (shrunk, deferred, dropped, torn down).
    pub profiling: ProfilingStats,
    /// The cluster the copies share with production (CPU cores, memory MB).
    pub cluster_cpu_cores: f64,
    pub cluster_memory_mb: f64,
    pub decision_time: Option<DecisionTime>,
}

impl Summary {
    pub fn max_recovery_s(&self) -> f64 {
        self.recoveries_s.iter().copied().fold(0.0, f64::max)
    }

    pub fn mean_recovery_s(&self) -> f64 {
        if self.recoveries_s.is_empty() {
            return 0.0;
        }
        self.recoveries_s.iter().sum::<f64>() / self.recoveries_s.len() as f64
    }

    pub fn reconfigurations(&self) -> u64 {
        self.changes.in_place + self.changes.full_restart
    }
}

/// Accumulates seconds into the summary's sums and the timeline's windows.
#[derive(Debug, Clone)]
pub struct Recorder {
    qos: Qos,
    seconds: u64,
    cpu_s: Usage,
    memory_mb_s: Usage,
    over_latency: OverLatency,
    in_failure_recovery: u64,
    in_changes: u64,
    downtime_failures: f64,
    downtime_changes: f64,
    failures: u64,
    recoveries: Vec<f64>,
    censored: u64,
    changes: Changes,
    pub timeline: Timeline,
}

impl Recorder {
    /// `every`: timeline window in seconds (0: no timeline).
    pub fn new(qos: Qos, every: u64) -> Self {
        Recorder {
            qos,
            seconds: 0,
            cpu_s: Usage::default(),
            memory_mb_s: Usage::default(),
            over_latency: OverLatency::default(),
            in_failure_recovery: 0,
            in_changes: 0,
            downtime_failures: 0.0,
            downtime_changes: 0.0,
            failures: 0,
            recoveries: Vec::new(),
            censored: 0,
            changes: Changes::default(),
            timeline: Timeline::new(every),
        }
    }

    pub fn second(&mut self, s: &Second, profiling: (f64, f64), forecast: Option<ForecastSummary>) {
        self.seconds += 1;
        add(&mut self.cpu_s, s.cpu_alloc, profiling.0);
        add(&mut self.memory_mb_s, s.memory_alloc_mb, profiling.1);
        let cause = self.cause(s);
        match cause {
            Cause::Failure => self.in_failure_recovery += 1,
            Cause::Change => self.in_changes += 1,
            Cause::Steady => {}
        }
        let over = s.latency_ms > self.qos.latency_p95_ms;
        if over {
            self.over_latency.total += 1;
            match cause {
                Cause::Steady => self.over_latency.steady += 1,
                Cause::Failure => self.over_latency.failure_recovery += 1,
                Cause::Change => self.over_latency.change += 1,
            }
        }
        let down = 1.0 - s.running_fraction;
        match s.phase {
            SimPhase::Failed => self.downtime_failures += down,
            _ => self.downtime_changes += down,
        }
        self.timeline
            .second(s, over.then_some(cause), profiling, forecast);
    }

    /// The cause a second is counted under: a failure recovery only up to the recovery QoS
    /// after the failure (the excused part).
    fn cause(&self, s: &Second) -> Cause {
        match s.disruption {
            Disruption::Change => Cause::Change,
            Disruption::Failure { since } if (s.t as f64) < since + self.qos.recovery_s => {
                Cause::Failure
            }
            Disruption::Failure { .. } | Disruption::None => Cause::Steady,
        }
    }

    pub fn failure(&mut self) {
        self.failures += 1;
    }

    pub fn recovered(&mut self, recovery_s: f64, censored: bool) {
        self.recoveries.push(recovery_s);
        if censored {
            self.censored += 1;
        }
    }

    pub fn changed(&mut self, kind: ChangeKind, outcome: &ReconfigureOutcome) {
        match kind {
            ChangeKind::InPlace => self.changes.in_place += 1,
            ChangeKind::FullRestart => self.changes.full_restart += 1,
        }
        if !outcome.succeeded {
            self.changes.rolled_back += 1;
        }
    }

    pub fn refused(&mut self) {
        self.changes.refused += 1;
    }

    /// Closes the last partial window and computes the summary.
    pub fn finish(
        &mut self,
        policy: &str,
        static_config: JobConfig,
        profiling: ProfilingStats,
        cluster: Resources,
        last: Option<&Second>,
    ) -> Summary {
        if let Some(last) = last {
            self.timeline.close(last, None);
        }
        let hours = self.seconds as f64 / 3600.0;
        let static_cpu = static_config.total_cpu_cores() * hours;
        let static_memory = static_config.total_memory_mb() / 1024.0 * hours;
        let cpu = scale(self.cpu_s, 1.0 / 3600.0);
        let memory = scale(self.memory_mb_s, 1.0 / 1024.0 / 3600.0);
        let ratio = |used: f64, reference: f64| {
            if reference > 0.0 {
                used / reference
            } else {
                0.0
            }
        };
        let cpu_ratio = ratio(cpu.total, static_cpu);
        let memory_ratio = ratio(memory.total, static_memory);
        let production_cost =
            0.5 * ratio(cpu.production, static_cpu) + 0.5 * ratio(memory.production, static_memory);
        Summary {
            policy: policy.to_owned(),
            seconds: self.seconds,
            qos: self.qos,
            static_config,
            static_cpu_core_hours: static_cpu,
            static_memory_gb_hours: static_memory,
            cpu_core_hours: cpu,
            memory_gb_hours: memory,
            cpu_ratio,
            memory_ratio,
            cost: 0.5 * cpu_ratio + 0.5 * memory_ratio,
            production_cost,
            seconds_over_latency: self.over_latency,
            percent_over_latency: 100.0
                * ratio(
                    (self.over_latency.steady + self.over_latency.change) as f64,
                    (self.seconds - self.in_failure_recovery) as f64,
                ),
            percent_over_latency_incl_failures: 100.0
                * ratio(self.over_latency.total as f64, self.seconds as f64),
            seconds_in_failure_recovery: self.in_failure_recovery,
            seconds_in_changes: self.in_changes,
            failures: self.failures,
            recoveries_s: self.recoveries.clone(),
            recoveries_censored: self.censored,
            recoveries_over_qos: self
                .recoveries
                .iter()
                .filter(|r| **r > self.qos.recovery_s)
                .count() as u64,
            changes: self.changes,
            downtime_failures_s: self.downtime_failures,
            downtime_changes_s: self.downtime_changes,
            profiling_batches: profiling.batches_started,
            profiling_copies: profiling.copies_started,
            profiling,
            cluster_cpu_cores: cluster.0,
            cluster_memory_mb: cluster.1,
            decision_time: None,
        }
    }
}

/// What a second is counted under (see [`OverLatency`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    Steady,
    Failure,
    Change,
}

fn add(usage: &mut Usage, production: f64, profiling: f64) {
    usage.production += production;
    usage.profiling += profiling;
    usage.total += production + profiling;
}

fn scale(usage: Usage, factor: f64) -> Usage {
    Usage {
        production: usage.production * factor,
        profiling: usage.profiling * factor,
        total: usage.total * factor,
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;

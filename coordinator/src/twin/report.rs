//! What a simulated run amounts to: the summary (resources, QoS, recoveries, changes) and the
//! timeline, accumulated second by second by [`Recorder`].

use serde::{Deserialize, Serialize};

use super::job::{Second, SimPhase};
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
    /// Seconds whose true p95 latency exceeded the QoS.
    pub seconds_over_latency: u64,
    pub percent_over_latency: f64,
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
    pub profiling_batches: u64,
    pub profiling_copies: u64,
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

/// One timeline row: a window of `every` seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineRow {
    pub t_s: u64,
    /// Mean offered rate, events/s.
    pub rate: f64,
    pub config: String,
    /// The worst phase of the window.
    pub phase: SimPhase,
    /// Highest true p95 latency of the window.
    pub latency_p95_ms: f64,
    pub backlog: f64,
    pub cpu_alloc: f64,
    pub memory_alloc_mb: f64,
    pub profiling_cpu: f64,
    pub profiling_memory_mb: f64,
    pub forecast_point: Option<f64>,
    pub forecast_upper: Option<f64>,
}

/// Accumulates seconds into the summary's sums and the timeline's windows.
#[derive(Debug, Clone)]
pub struct Recorder {
    qos: Qos,
    every: u64,
    seconds: u64,
    cpu_s: Usage,
    memory_mb_s: Usage,
    over_latency: u64,
    downtime_failures: f64,
    downtime_changes: f64,
    failures: u64,
    recoveries: Vec<f64>,
    censored: u64,
    changes: Changes,
    window: Option<TimelineRow>,
    window_len: u64,
    pub timeline: Vec<TimelineRow>,
}

impl Recorder {
    /// `every`: timeline window in seconds (0: no timeline).
    pub fn new(qos: Qos, every: u64) -> Self {
        Recorder {
            qos,
            every,
            seconds: 0,
            cpu_s: Usage::default(),
            memory_mb_s: Usage::default(),
            over_latency: 0,
            downtime_failures: 0.0,
            downtime_changes: 0.0,
            failures: 0,
            recoveries: Vec::new(),
            censored: 0,
            changes: Changes::default(),
            window: None,
            window_len: 0,
            timeline: Vec::new(),
        }
    }

    pub fn second(&mut self, s: &Second, profiling: (f64, f64), forecast: Option<ForecastSummary>) {
        self.seconds += 1;
        add(&mut self.cpu_s, s.cpu_alloc, profiling.0);
        add(&mut self.memory_mb_s, s.memory_alloc_mb, profiling.1);
        if s.latency_ms > self.qos.latency_p95_ms {
            self.over_latency += 1;
        }
        let down = 1.0 - s.running_fraction;
        match s.phase {
            SimPhase::Failed => self.downtime_failures += down,
            _ => self.downtime_changes += down,
        }
        if self.every > 0 {
            self.window_second(s, profiling, forecast);
        }
    }

    fn window_second(
        &mut self,
        s: &Second,
        profiling: (f64, f64),
        forecast: Option<ForecastSummary>,
    ) {
        let row = self.window.get_or_insert_with(|| TimelineRow {
            t_s: s.t,
            rate: 0.0,
            config: String::new(),
            phase: SimPhase::Running,
            latency_p95_ms: 0.0,
            backlog: 0.0,
            cpu_alloc: 0.0,
            memory_alloc_mb: 0.0,
            profiling_cpu: 0.0,
            profiling_memory_mb: 0.0,
            forecast_point: None,
            forecast_upper: None,
        });
        row.rate += s.rate;
        row.phase = row.phase.max(s.phase);
        row.latency_p95_ms = row.latency_p95_ms.max(s.latency_ms);
        row.cpu_alloc += s.cpu_alloc;
        row.memory_alloc_mb += s.memory_alloc_mb;
        row.profiling_cpu += profiling.0;
        row.profiling_memory_mb += profiling.1;
        self.window_len += 1;
        if self.window_len == self.every {
            self.close_window(s, forecast);
        }
    }

    fn close_window(&mut self, last: &Second, forecast: Option<ForecastSummary>) {
        let Some(mut row) = self.window.take() else {
            return;
        };
        let n = self.window_len as f64;
        row.rate /= n;
        row.cpu_alloc /= n;
        row.memory_alloc_mb /= n;
        row.profiling_cpu /= n;
        row.profiling_memory_mb /= n;
        row.config = last.config.to_string();
        row.backlog = last.backlog;
        row.forecast_point = forecast.map(|f| f.point_max);
        row.forecast_upper = forecast.map(|f| f.upper_max);
        self.timeline.push(row);
        self.window_len = 0;
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
        profiling: (u64, u64),
        last: Option<&Second>,
    ) -> Summary {
        if let Some(last) = last
            && self.window_len > 0
        {
            self.close_window(last, None);
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
            percent_over_latency: 100.0 * ratio(self.over_latency as f64, self.seconds as f64),
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
            profiling_batches: profiling.0,
            profiling_copies: profiling.1,
            decision_time: None,
        }
    }
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

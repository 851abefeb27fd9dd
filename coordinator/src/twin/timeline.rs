//! The timeline of a simulated run: one row per window of `every` seconds (means, the worst
//! phase and latency, seconds over the latency QoS by cause).

use serde::{Deserialize, Serialize};

use super::job::{Second, SimPhase};
use super::report::Cause;
use crate::policy::ForecastSummary;

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
    /// Seconds of the window over the latency QoS, by cause (see [`OverLatency`]).
    pub over_qos_steady_s: u32,
    pub over_qos_failure_s: u32,
    pub over_qos_change_s: u32,
    pub backlog: f64,
    pub cpu_alloc: f64,
    pub memory_alloc_mb: f64,
    pub profiling_cpu: f64,
    pub profiling_memory_mb: f64,
    pub forecast_point: Option<f64>,
    pub forecast_upper: Option<f64>,
}

/// Windows of `every` seconds (0: no timeline).
#[derive(Debug, Clone)]
pub struct Timeline {
    every: u64,
    window: Option<TimelineRow>,
    len: u64,
    pub rows: Vec<TimelineRow>,
}

impl Timeline {
    pub fn new(every: u64) -> Self {
        Timeline {
            every,
            window: None,
            len: 0,
            rows: Vec::new(),
        }
    }

    /// Adds a second; `over` is the cause it counts under when over the latency QoS.
    pub fn second(
        &mut self,
        s: &Second,
        over: Option<Cause>,
        profiling: (f64, f64),
        forecast: Option<ForecastSummary>,
    ) {
        if self.every == 0 {
            return;
        }
        let row = self.window.get_or_insert_with(|| TimelineRow {
            t_s: s.t,
            rate: 0.0,
            config: String::new(),
            phase: SimPhase::Running,
            latency_p95_ms: 0.0,
            over_qos_steady_s: 0,
            over_qos_failure_s: 0,
            over_qos_change_s: 0,
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
        match over {
            Some(Cause::Steady) => row.over_qos_steady_s += 1,
            Some(Cause::Failure) => row.over_qos_failure_s += 1,
            Some(Cause::Change) => row.over_qos_change_s += 1,
            None => {}
        }
        row.cpu_alloc += s.cpu_alloc;
        row.memory_alloc_mb += s.memory_alloc_mb;
        row.profiling_cpu += profiling.0;
        row.profiling_memory_mb += profiling.1;
        self.len += 1;
        if self.len == self.every {
            self.close(s, forecast);
        }
    }

    /// Closes the open window (if any) with `last` as its final second.
    pub fn close(&mut self, last: &Second, forecast: Option<ForecastSummary>) {
        let Some(mut row) = self.window.take() else {
            return;
        };
        let n = self.len as f64;
        row.rate /= n;
        row.cpu_alloc /= n;
        row.memory_alloc_mb /= n;
        row.profiling_cpu /= n;
        row.profiling_memory_mb /= n;
        row.config = last.config.to_string();
        row.backlog = last.backlog;
        row.forecast_point = forecast.map(|f| f.point_max);
        row.forecast_upper = forecast.map(|f| f.upper_max);
        self.rows.push(row);
        self.len = 0;
    }
}

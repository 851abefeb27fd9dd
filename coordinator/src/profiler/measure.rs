//! What a copy's REST readings say, and the measurement over a window of them. Pure.

use serde::{Deserialize, Serialize};

use super::plan::Resources;
use crate::models::observations::Observation;
use crate::models::space::JobConfig;

/// Busy time of one non-source vertex.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VertexBusy {
    pub parallelism: u32,
    /// `accumulated-busy-time` summed over subtasks, ms (cumulative).
    pub accumulated_busy_ms: Option<f64>,
    /// `busyTimeMsPerSecond`, mean over subtasks (a moving average Flink keeps).
    pub busy_ms_per_second: Option<f64>,
}

/// The checkpoint schedule as Flink reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointTiming {
    /// Trigger time of the latest completed checkpoint, ms since the epoch.
    pub last_completed_trigger_ms: Option<u64>,
    pub interval_ms: u64,
}

/// One reading of a copy's job (plus the resources its TaskManagers use).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CopySample {
    /// Job RUNNING with every vertex RUNNING.
    pub fully_running: bool,
    /// Vertex parallelisms in job order.
    pub parallelism: Vec<u32>,
    pub restarts: f64,
    /// Records the sources emitted so far.
    pub source_records: f64,
    /// Non-source vertices.
    pub busy: Vec<VertexBusy>,
    /// Sources' `backPressuredTimeMsPerSecond`, max over subtasks.
    pub source_backpressure_ms: Option<f64>,
    /// The latency metric, max over the vertices and subtasks that report it.
    pub latency_p95_ms: Option<f64>,
    pub checkpoint: Option<CheckpointTiming>,
    /// CPU cores and resident memory of the copy's TaskManagers now.
    pub usage: Option<Resources>,
}

/// Sources back-pressured more than this (ms/s, mean over the window) means the copy could not
/// take the ordered rate: the offered rate is then the ordered one, not what got through.
pub const BACKPRESSURED_MS: f64 = 500.0;

/// The measurement over `window` (readings in time order, each with its time in ms).
/// `None` when the window is too short or the latency metric never reported.
pub fn measure(
    config: JobConfig,
    ordered_rate: f64,
    window: &[(u64, CopySample)],
) -> Option<Observation> {
    let ((t0, first), (t1, last)) = (window.first()?, window.last()?);
    let seconds = t1.saturating_sub(*t0) as f64 / 1000.0;
    if seconds <= 0.0 {
        return None;
    }
    let emitted = ((last.source_records - first.source_records) / seconds).max(0.0);
    let backpressure = mean(window.iter().filter_map(|(_, s)| s.source_backpressure_ms));
    let rate = if backpressure.is_some_and(|bp| bp > BACKPRESSURED_MS) {
        ordered_rate.max(emitted)
    } else {
        emitted
    };
    let latency = mean(
        window
            .iter()
            .filter_map(|(_, s)| s.latency_p95_ms)
            .filter(|v| v.is_finite() && *v > 0.0),
    )?;
    let usage: Vec<Resources> = window.iter().filter_map(|(_, s)| s.usage).collect();
    Some(Observation {
        config,
        rate,
        busy_fraction: bottleneck_busy(first, last, seconds)
            .or_else(|| gauge_busy(window))
            .map(|b| b.clamp(0.0, 1.0)),
        latency_p95_ms: latency,
        recovery_s: None,
        cpu_cores: mean(usage.iter().map(|u| u.cpu_cores)).unwrap_or(0.0),
        memory_mb: mean(usage.iter().map(|u| u.memory_mb)).unwrap_or(0.0),
    })
}

/// The busiest non-source vertex's mean busy fraction from the cumulative counters: exact over
/// the window, unlike Flink's per-second gauge (a moving average that still remembers start-up).
fn bottleneck_busy(first: &CopySample, last: &CopySample, seconds: f64) -> Option<f64> {
    if first.busy.len() != last.busy.len() {
        return None;
    }
    first
        .busy
        .iter()
        .zip(&last.busy)
        .filter_map(|(a, b)| {
            let delta = b.accumulated_busy_ms? - a.accumulated_busy_ms?;
            (b.parallelism == a.parallelism && b.parallelism > 0 && delta > 0.0)
                .then(|| delta / (seconds * 1000.0 * f64::from(b.parallelism)))
        })
        .reduce(f64::max)
}

fn gauge_busy(window: &[(u64, CopySample)]) -> Option<f64> {
    mean(window.iter().filter_map(|(_, s)| {
        s.busy
            .iter()
            .filter_map(|v| v.busy_ms_per_second)
            .filter(|v| v.is_finite())
            .reduce(f64::max)
            .map(|ms| ms / 1000.0)
    }))
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// When to kill a TaskManager so the failure lands just before a checkpoint (the most work to
/// replay): the first `last trigger + k × interval − margin` not before `now`. Flink triggers
/// periodic checkpoints at a fixed rate, so the next trigger follows the last by the interval.
pub fn kill_time(now: u64, timing: &CheckpointTiming, margin_ms: u64) -> Option<u64> {
    let last = timing.last_completed_trigger_ms?;
    let interval = timing.interval_ms;
    if interval == 0 || interval <= margin_ms {
        return None;
    }
    let k = (now + margin_ms)
        .saturating_sub(last)
        .div_ceil(interval)
        .max(1);
    Some(last + k * interval - margin_ms)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample(records: f64, busy_acc: Option<f64>, bp: f64, latency: f64) -> CopySample {
        CopySample {
            fully_running: true,
            parallelism: vec![1, 2],
            source_records: records,
            busy: vec![VertexBusy {
                parallelism: 2,
                accumulated_busy_ms: busy_acc,
                busy_ms_per_second: Some(300.0),
            }],
            source_backpressure_ms: Some(bp),
            latency_p95_ms: Some(latency),
            usage: Some(Resources {
                cpu_cores: 1.0,
                memory_mb: 1000.0,
            }),
            ..CopySample::default()
        }
    }

    fn cfg() -> JobConfig {
        "p=2,slots=2,mem=1g,cpu=1,ckpt=5s".parse().unwrap()
    }

    #[test]
    fn busy_from_counters_rate_from_records_latency_averaged() {
        let w = [
            (0, sample(0.0, Some(0.0), 0.0, 100.0)),
            (5_000, sample(2_500.0, Some(3_000.0), 0.0, 140.0)),
            (10_000, sample(5_000.0, Some(6_000.0), 0.0, 120.0)),
        ];
        let o = measure(cfg(), 600.0, &w).unwrap();
        assert_eq!(o.rate, 500.0, "what got through, not what was ordered");
        assert_eq!(o.busy_fraction, Some(0.3), "6000 ms over 10 s × 2 subtasks");
        assert_eq!(o.latency_p95_ms, 120.0);
        assert_eq!((o.cpu_cores, o.memory_mb), (1.0, 1000.0));
    }

    #[test]
    fn without_counters_the_gauge_and_when_backpressured_the_ordered_rate() {
        let w = [
            (0, sample(0.0, None, 800.0, 900.0)),
            (10_000, sample(3_000.0, None, 900.0, 1_100.0)),
        ];
        let o = measure(cfg(), 600.0, &w).unwrap();
        assert_eq!(o.busy_fraction, Some(0.3));
        assert_eq!(
            o.rate, 600.0,
            "backpressured: the offered rate is the ordered one"
        );
        assert!(measure(cfg(), 1.0, &w[..1]).is_none(), "no window");
    }

    #[test]
    fn kill_lands_the_margin_before_the_next_trigger() {
        let t = CheckpointTiming {
            last_completed_trigger_ms: Some(10_000),
            interval_ms: 5_000,
        };
        assert_eq!(kill_time(11_000, &t, 1_000), Some(14_000));
        assert_eq!(kill_time(14_000, &t, 1_000), Some(14_000));
        assert_eq!(kill_time(14_001, &t, 1_000), Some(19_000));
        assert_eq!(kill_time(100_000, &t, 1_000), Some(104_000));
        let none = CheckpointTiming {
            last_completed_trigger_ms: None,
            ..t
        };
        assert_eq!(kill_time(11_000, &none, 1_000), None);
        assert_eq!(
            kill_time(
                11_000,
                &CheckpointTiming {
                    interval_ms: 500,
                    ..t
                },
                1_000
            ),
            None
        );
    }
}

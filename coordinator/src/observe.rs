//! From what Flink and the agents report to one [`JobTick`] per observation period (design §4.1):
//! the policy's only view of production. Pure, so it is tested on fixtures; the daemon's poller
//! feeds it REST snapshots and the agents' latest JVM samples.
//!
//! Choices, each because Flink's own numbers mislead otherwise:
//! - **Offered rate** = what the sources emitted + how fast the backlog grew. Under
//!   backpressure the sources emit only what the job can take; the forecast and the models need
//!   what was *offered*, or an overloaded job would look like a job at exactly its capacity.
//! - **Busy fraction** = the largest mean busy time of any non-source vertex (the bottleneck;
//!   sources are mostly idle or waiting on backpressure, which says nothing about capacity).
//! - **Phase** = `Running` only when the job is RUNNING with every vertex running; a job in
//!   RESTARTING or partially deployed processes nothing the models should learn from.

use demeter_common::metrics::JvmSample;

use crate::flink::{JobMetricsSnapshot, JobState};
use crate::models::space::JobConfig;
use crate::policy::{JobPhase, JobTick};

/// The figures of one period besides the REST snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeriodExtras {
    /// p95 end-to-end latency from the job's latency metric (max over subtasks), if reported.
    pub latency_p95_ms: Option<f64>,
    /// Records waiting at the sources now (`pendingRecords` summed), if the source reports it.
    pub backlog: Option<f64>,
    /// The backlog one period earlier, and the period's length in seconds.
    pub previous_backlog: Option<f64>,
    pub period_s: f64,
    /// Whether every vertex of the job is deployed and running (from the job details).
    pub fully_running: bool,
}

/// The tick for the period that just ended. `jvms` are the latest samples of the job's
/// TaskManagers (from the agents), used for the CPU and memory actually used.
pub fn job_tick(
    snapshot: &JobMetricsSnapshot,
    extras: &PeriodExtras,
    config: JobConfig,
    jvms: &[&JvmSample],
) -> JobTick {
    let running = snapshot.state == JobState::Running && extras.fully_running;
    let emitted = snapshot.input_rate.unwrap_or(0.0).max(0.0);
    let growth = match (extras.backlog, extras.previous_backlog) {
        (Some(now), Some(before)) if extras.period_s > 0.0 => {
            ((now - before) / extras.period_s).max(0.0)
        }
        _ => 0.0,
    };
    let busy_fraction = snapshot
        .vertices
        .iter()
        .filter(|v| !v.is_source)
        .filter_map(|v| v.busy_ms_per_second.avg)
        .filter(|ms| ms.is_finite())
        .map(|ms| (ms / 1000.0).clamp(0.0, 1.0))
        .reduce(f64::max);
    JobTick {
        phase: if running {
            JobPhase::Running
        } else {
            JobPhase::Down
        },
        config,
        rate: emitted + growth,
        busy_fraction,
        latency_p95_ms: extras
            .latency_p95_ms
            .filter(|ms| ms.is_finite() && *ms >= 0.0),
        backlog: extras.backlog.unwrap_or(0.0).max(0.0),
        cpu_cores: jvms.iter().map(|j| f64::from(j.cpu_cores)).sum(),
        memory_mb: jvms.iter().map(|j| j.rss_bytes as f64).sum::<f64>() / (1024.0 * 1024.0),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::flink::{JobId, MaxAvg, VertexId, VertexSnapshot};

    fn vertex(id: &str, is_source: bool, busy_avg: f64) -> VertexSnapshot {
        VertexSnapshot {
            id: VertexId::from(id),
            name: id.to_string(),
            parallelism: 2,
            is_source,
            records_in_per_second: None,
            records_out_per_second: None,
            busy_ms_per_second: MaxAvg {
                max: Some(busy_avg + 50.0),
                avg: Some(busy_avg),
            },
            backpressured_ms_per_second: MaxAvg::default(),
            idle_ms_per_second: MaxAvg::default(),
        }
    }

    fn snapshot(state: JobState, emitted: f64) -> JobMetricsSnapshot {
        JobMetricsSnapshot {
            job_id: JobId::from("a".repeat(32).as_str()),
            state,
            input_rate: Some(emitted),
            vertices: vec![
                vertex("source", true, 900.0),
                vertex("window", false, 600.0),
                vertex("sink", false, 200.0),
            ],
            num_restarts: None,
            uptime_ms: None,
            last_checkpoint_duration_ms: None,
            last_checkpoint_size_bytes: None,
            completed_checkpoints: None,
            failed_checkpoints: None,
            checkpoint_duration_ms: None,
        }
    }

    fn extras(backlog: f64, previous: f64) -> PeriodExtras {
        PeriodExtras {
            latency_p95_ms: Some(120.0),
            backlog: Some(backlog),
            previous_backlog: Some(previous),
            period_s: 2.0,
            fully_running: true,
        }
    }

    #[test]
    fn offered_rate_adds_backlog_growth_and_busy_is_the_bottleneck_not_the_source() {
        let jvm = JvmSample {
            cpu_cores: 0.5,
            rss_bytes: 512 << 20,
            ..JvmSample::default()
        };
        let tick = job_tick(
            &snapshot(JobState::Running, 1000.0),
            &extras(700.0, 500.0),
            JobConfig::paper_default(),
            &[&jvm, &jvm],
        );
        assert_eq!(tick.phase, JobPhase::Running);
        assert!((tick.rate - 1100.0).abs() < 1e-9, "{}", tick.rate);
        assert_eq!(tick.busy_fraction, Some(0.6));
        assert_eq!(tick.backlog, 700.0);
        assert!((tick.cpu_cores - 1.0).abs() < 1e-9);
        assert!((tick.memory_mb - 1024.0).abs() < 1e-9);
        // A draining backlog does not lower the offered rate below what the sources emitted.
        let draining = job_tick(
            &snapshot(JobState::Running, 1000.0),
            &extras(100.0, 500.0),
            JobConfig::paper_default(),
            &[],
        );
        assert_eq!(draining.rate, 1000.0);
    }

    #[test]
    fn a_restarting_or_partly_deployed_job_is_down() {
        let restarting = job_tick(
            &snapshot(JobState::Restarting, 0.0),
            &extras(0.0, 0.0),
            JobConfig::paper_default(),
            &[],
        );
        assert_eq!(restarting.phase, JobPhase::Down);
        assert!(restarting.observation().is_none());
        let partial = PeriodExtras {
            fully_running: false,
            ..extras(0.0, 0.0)
        };
        let tick = job_tick(
            &snapshot(JobState::Running, 10.0),
            &partial,
            JobConfig::paper_default(),
            &[],
        );
        assert_eq!(tick.phase, JobPhase::Down);
    }

    #[test]
    fn nonsense_latency_is_dropped() {
        let mut e = extras(0.0, 0.0);
        e.latency_p95_ms = Some(f64::NAN);
        let tick = job_tick(
            &snapshot(JobState::Running, 10.0),
            &e,
            JobConfig::paper_default(),
            &[],
        );
        assert_eq!(tick.latency_p95_ms, None);
        assert!(tick.observation().is_none(), "no latency, no observation");
    }
}

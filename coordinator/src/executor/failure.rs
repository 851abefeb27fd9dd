//! Failure injection for profiling: SIGKILL one TaskManager of a running job, start its
//! replacement, and time the recovery (RUNNING again → records flowing → backlog drained).

use std::time::Duration;

use demeter_common::protocol::TaskManagerSpec;

use super::driver::now_ms;
use super::taskmanagers::TaskManagers;
use crate::flink::{Aggregation, FlinkClient, JobId, VertexId};
use crate::{Error, Result};

/// When the backlog counts as drained.
#[derive(Debug, Clone, PartialEq)]
pub struct Drained {
    /// Sources back-pressured at most this much (ms per second, max over subtasks).
    pub max_source_backpressure_ms: f64,
    /// Optionally one more metric (vertex, name, aggregated max) that must be at most the
    /// bound, e.g. the benchmark job's `window.latencyP95Ms`.
    pub metric: Option<(VertexId, String, f64)>,
    /// Consecutive polls that must agree.
    pub polls: u32,
}

/// Milliseconds after the kill at which each milestone was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    pub killed: String,
    /// All vertices RUNNING again at the job's parallelism, after a restart.
    pub running_ms: u64,
    /// Sources emitting again.
    pub flowing_ms: u64,
    /// [`Drained`] held.
    pub drained_ms: u64,
    pub restarts: f64,
}

/// Kills TaskManager `victim` of `job` (one of `specs`), has the backend start it again, and
/// polls the REST API every `poll` until the job has recovered or `deadline` passed.
#[allow(clippy::too_many_arguments)]
pub async fn kill_and_time_recovery(
    client: &FlinkClient,
    taskmanagers: &dyn TaskManagers,
    job_name: &str,
    specs: &[TaskManagerSpec],
    job: &JobId,
    victim: &str,
    drained: &Drained,
    poll: Duration,
    deadline: Duration,
) -> Result<Recovery> {
    let restarts = |v: &crate::flink::MetricValues| v.number("numRestarts").unwrap_or(0.0);
    let before = restarts(&client.job_metrics(job, &["numRestarts"]).await?);
    let parallelism: Vec<u32> = client
        .job_details(job)
        .await?
        .vertices
        .iter()
        .map(|v| v.parallelism)
        .collect();
    let t0 = now_ms();
    taskmanagers.kill(victim).await?;
    tracing::info!(victim, %job, "TaskManager killed; starting its replacement");
    // The replacement: the backend sees the process gone and starts it again.
    let mut replaced = false;
    let (mut running, mut flowing, mut good) = (None, None, 0u32);
    let mut last_records = None;
    loop {
        let elapsed = now_ms().saturating_sub(t0);
        if elapsed > deadline.as_millis() as u64 {
            return Err(Error::Executor(format!(
                "job {job} not recovered {deadline:?} after killing {victim}"
            )));
        }
        if !replaced
            && !taskmanagers
                .alive(job_name)
                .await?
                .iter()
                .any(|id| id == victim)
        {
            taskmanagers.ensure(job_name, specs).await?;
            replaced = true;
        }
        tokio::time::sleep(poll).await;
        let Ok(details) = client.job_details(job).await else {
            continue;
        };
        let now_restarts = client
            .job_metrics(job, &["numRestarts"])
            .await
            .map(|v| restarts(&v))
            .unwrap_or(before);
        let at = now_ms().saturating_sub(t0);
        let same_shape = details
            .vertices
            .iter()
            .map(|v| v.parallelism)
            .collect::<Vec<_>>()
            == parallelism;
        if running.is_none() {
            if details.is_fully_running() && same_shape && now_restarts > before {
                running = Some(at);
            }
            continue;
        }
        let records: f64 = details
            .source_vertices()
            .iter()
            .filter_map(|v| v.metrics.as_ref().and_then(|m| m.write_records))
            .sum();
        if flowing.is_none() {
            if last_records.is_some_and(|r| records > r) {
                flowing = Some(at);
            }
            last_records = Some(records);
            continue;
        }
        if is_drained(client, job, &details, drained).await {
            good += 1;
            if good >= drained.polls {
                return Ok(Recovery {
                    killed: victim.to_string(),
                    running_ms: running.unwrap_or(at),
                    flowing_ms: flowing.unwrap_or(at),
                    drained_ms: at,
                    restarts: now_restarts - before,
                });
            }
        } else {
            good = 0;
        }
    }
}

async fn is_drained(
    client: &FlinkClient,
    job: &JobId,
    details: &crate::flink::JobDetails,
    drained: &Drained,
) -> bool {
    for source in details.source_vertices() {
        let Ok(m) = client
            .vertex_subtask_metrics(
                job,
                &source.id,
                &["backPressuredTimeMsPerSecond"],
                &[Aggregation::Max],
            )
            .await
        else {
            return false;
        };
        let bp = m.get("backPressuredTimeMsPerSecond").and_then(|a| a.max);
        if bp.is_none_or(|bp| bp > drained.max_source_backpressure_ms) {
            return false;
        }
    }
    if let Some((vertex, name, bound)) = &drained.metric {
        let Ok(m) = client
            .vertex_subtask_metrics(job, vertex, &[name.as_str()], &[Aggregation::Max])
            .await
        else {
            return false;
        };
        if m.get(name).and_then(|a| a.max).is_none_or(|v| v > *bound) {
            return false;
        }
    }
    true
}

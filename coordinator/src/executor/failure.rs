//! Failure injection for profiling: SIGKILL one TaskManager of a running job, start its
//! replacement, and time the recovery (RUNNING again → records flowing → backlog drained).
//!
//! [`RecoveryWatch`] is the pure part (milestones from successive REST readings), shared by
//! [`kill_and_time_recovery`] here and the profiler's per-copy state machine.

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

/// One REST reading of a job after the kill.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryPoint {
    /// Wall clock of the reading, ms since the epoch (the same clock as the kill time).
    pub at_ms: u64,
    /// Job RUNNING with every vertex RUNNING.
    pub fully_running: bool,
    /// Vertex parallelisms in job order.
    pub parallelism: Vec<u32>,
    /// `numRestarts`.
    pub restarts: f64,
    /// Records the sources emitted so far (summed `write-records`).
    pub source_records: f64,
    /// Whether the drain criterion held at this reading; only asked for once records flow
    /// ([`RecoveryWatch::wants_drain_check`]).
    pub drained: bool,
}

/// Recovery milestones from successive readings: RUNNING at the old shape after a restart
/// (a RUNNING job that never restarted has not noticed the kill yet), then records flowing
/// (the sources' counter grew between two readings), then [`Drained`] for `polls` readings in
/// a row.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryWatch {
    victim: String,
    killed_at_ms: u64,
    parallelism: Vec<u32>,
    restarts_before: f64,
    polls: u32,
    /// The job showed the kill: not fully running, at another parallelism, or restarted.
    noticed: bool,
    running: Option<u64>,
    flowing: Option<u64>,
    last_records: Option<f64>,
    good: u32,
}

impl RecoveryWatch {
    pub fn new(
        victim: &str,
        killed_at_ms: u64,
        parallelism: Vec<u32>,
        restarts_before: f64,
        polls: u32,
    ) -> Self {
        Self {
            victim: victim.to_string(),
            killed_at_ms,
            parallelism,
            restarts_before,
            polls: polls.max(1),
            noticed: false,
            running: None,
            flowing: None,
            last_records: None,
            good: 0,
        }
    }

    /// Whether the next reading must say if the drain criterion holds (records flow).
    pub fn wants_drain_check(&self) -> bool {
        self.flowing.is_some()
    }

    /// Milliseconds since the kill at `at_ms`.
    pub fn elapsed_ms(&self, at_ms: u64) -> u64 {
        at_ms.saturating_sub(self.killed_at_ms)
    }

    /// Which milestones were reached so far, for error messages.
    pub fn progress(&self) -> String {
        format!(
            "running at {:?} ms, flowing at {:?} ms, {} drained reading(s) of {}",
            self.running, self.flowing, self.good, self.polls
        )
    }

    /// Feeds one reading; returns the recovery once drained.
    pub fn observe(&mut self, p: &RecoveryPoint) -> Option<Recovery> {
        let at = self.elapsed_ms(p.at_ms);
        if self.running.is_none() {
            // The adaptive scheduler may run the job smaller until the replacement registers,
            // then rescale it back, and `numRestarts` can read stale or missing (a missing
            // metric reads 0) while Flink's REST metric fetcher waits on the dead TaskManager:
            // any sign of the failover counts, not only a higher restart count.
            self.noticed |= !p.fully_running
                || p.parallelism != self.parallelism
                || p.restarts > self.restarts_before;
            if self.noticed && p.fully_running && p.parallelism == self.parallelism {
                self.running = Some(at);
                self.last_records = Some(p.source_records);
            }
            return None;
        }
        if !p.fully_running {
            // Failed again: the recovery starts over from the next RUNNING.
            self.running = None;
            self.flowing = None;
            self.last_records = None;
            self.good = 0;
            return None;
        }
        if self.flowing.is_none() {
            if self.last_records.is_some_and(|r| p.source_records > r) {
                self.flowing = Some(at);
            }
            self.last_records = Some(p.source_records);
            return None;
        }
        if !p.drained {
            self.good = 0;
            return None;
        }
        self.good += 1;
        (self.good >= self.polls).then(|| Recovery {
            killed: self.victim.clone(),
            running_ms: self.running.unwrap_or(at),
            flowing_ms: self.flowing.unwrap_or(at),
            drained_ms: at,
            restarts: (p.restarts - self.restarts_before).max(0.0),
        })
    }
}

/// SIGKILLs `victim` and, once its process is gone and Flink has dropped its registration,
/// has the backend start it again (what a supervisor does in production). Returns the kill
/// time (ms since the epoch).
///
/// Why wait for Flink: a replacement that registers under the same resource id while the
/// ResourceManager still holds the dead one's registration races Flink's duplicate-registration
/// handling (the dead TaskManager's failure can then be applied to its replacement, and the job
/// waits for slots that never come). The wait is bounded by `unregistered_within` (the cluster's
/// heartbeat timeout plus a margin): the replacement starts then regardless.
pub async fn kill_and_replace(
    client: &FlinkClient,
    taskmanagers: &dyn TaskManagers,
    job_name: &str,
    specs: &[TaskManagerSpec],
    victim: &str,
    gone_within: Duration,
    unregistered_within: Duration,
) -> Result<u64> {
    let t0 = now_ms();
    taskmanagers.kill(victim).await?;
    tracing::info!(victim, job = job_name, "TaskManager killed");
    let deadline = tokio::time::Instant::now() + gone_within;
    while taskmanagers
        .alive(job_name)
        .await?
        .iter()
        .any(|id| id == victim)
    {
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Executor(format!(
                "TaskManager {victim} still alive {gone_within:?} after SIGKILL"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = tokio::time::Instant::now() + unregistered_within;
    loop {
        let registered = client
            .taskmanagers()
            .await
            .map(|tms| tms.iter().any(|tm| tm.id.as_str() == victim))
            .unwrap_or(true);
        if !registered {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            tracing::warn!(
                victim,
                ?unregistered_within,
                "Flink still lists the killed TaskManager; starting its replacement anyway"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::info!(
        victim,
        job = job_name,
        waited_ms = now_ms().saturating_sub(t0),
        "starting the replacement TaskManager"
    );
    taskmanagers.ensure(job_name, specs).await?;
    Ok(t0)
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
    let t0 = kill_and_replace(
        client,
        taskmanagers,
        job_name,
        specs,
        victim,
        deadline,
        UNREGISTERED_WITHIN,
    )
    .await?;
    let mut watch = RecoveryWatch::new(victim, t0, parallelism, before, drained.polls);
    let mut last: Option<RecoveryPoint> = None;
    loop {
        if watch.elapsed_ms(now_ms()) > deadline.as_millis() as u64 {
            return Err(Error::Executor(format!(
                "job {job} not recovered {deadline:?} after killing {victim}; {}; last reading: {last:?}",
                watch.progress()
            )));
        }
        tokio::time::sleep(poll).await;
        let Ok(details) = client.job_details(job).await else {
            continue;
        };
        let point = RecoveryPoint {
            at_ms: now_ms(),
            fully_running: details.is_fully_running(),
            parallelism: details.vertices.iter().map(|v| v.parallelism).collect(),
            restarts: client
                .job_metrics(job, &["numRestarts"])
                .await
                .map(|v| restarts(&v))
                .unwrap_or(before),
            source_records: source_records(&details),
            drained: watch.wants_drain_check() && is_drained(client, job, &details, drained).await,
        };
        if let Some(recovery) = watch.observe(&point) {
            return Ok(recovery);
        }
        last = Some(point);
    }
}

/// How long to wait for Flink to drop a killed TaskManager before starting its replacement:
/// the heartbeat timeout Demeter's clusters use (10 s) plus a margin.
pub const UNREGISTERED_WITHIN: Duration = Duration::from_secs(15);

/// Records the job's sources emitted so far.
pub fn source_records(details: &crate::flink::JobDetails) -> f64 {
    details
        .source_vertices()
        .iter()
        .filter_map(|v| v.metrics.as_ref().and_then(|m| m.write_records))
        .sum()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn point(
        at_ms: u64,
        running: bool,
        restarts: f64,
        records: f64,
        drained: bool,
    ) -> RecoveryPoint {
        RecoveryPoint {
            at_ms,
            fully_running: running,
            parallelism: vec![1, 2],
            restarts,
            source_records: records,
            drained,
        }
    }

    #[test]
    fn milestones_in_order_running_flowing_drained() {
        let mut w = RecoveryWatch::new("tm0", 1_000, vec![1, 2], 0.0, 2);
        // Still RUNNING from before the kill: no restart counted yet, not a milestone.
        assert_eq!(w.observe(&point(1_500, true, 0.0, 100.0, true)), None);
        assert_eq!(w.observe(&point(3_000, false, 1.0, 100.0, false)), None);
        assert!(!w.wants_drain_check());
        assert_eq!(w.observe(&point(6_000, true, 1.0, 100.0, false)), None);
        assert_eq!(w.observe(&point(7_000, true, 1.0, 150.0, false)), None);
        assert!(w.wants_drain_check());
        assert_eq!(w.observe(&point(8_000, true, 1.0, 200.0, true)), None);
        let r = w.observe(&point(9_000, true, 1.0, 250.0, true)).unwrap();
        assert_eq!(
            (r.running_ms, r.flowing_ms, r.drained_ms),
            (5_000, 6_000, 8_000)
        );
        assert_eq!(r.restarts, 1.0);
        assert_eq!(r.killed, "tm0");
    }

    #[test]
    fn a_rescale_back_after_the_failover_counts_though_its_restart_count_reads_zero() {
        // Seen in CI: the adaptive scheduler ran the job at p=1 until the replacement
        // registered, then rescaled it back, while numRestarts read 0.
        let mut w = RecoveryWatch::new("tm1", 0, vec![1, 2], 0.0, 1);
        let mut smaller = point(1_000, true, 3.0, 10.0, false);
        smaller.parallelism = vec![1, 1];
        assert_eq!(w.observe(&smaller), None);
        assert_eq!(w.observe(&point(40_000, true, 0.0, 0.0, false)), None);
        assert_eq!(w.observe(&point(41_000, true, 0.0, 50.0, false)), None);
        let r = w.observe(&point(42_000, true, 0.0, 90.0, true)).unwrap();
        assert_eq!(
            (r.running_ms, r.flowing_ms, r.drained_ms),
            (40_000, 41_000, 42_000)
        );
        assert_eq!(r.restarts, 0.0);
    }

    #[test]
    fn a_second_failure_or_a_smaller_shape_restarts_the_watch() {
        let mut w = RecoveryWatch::new("tm0", 0, vec![1, 2], 3.0, 1);
        let mut smaller = point(1_000, true, 4.0, 10.0, true);
        smaller.parallelism = vec![1, 1];
        assert_eq!(w.observe(&smaller), None, "scaled down is not recovered");
        assert_eq!(w.observe(&point(2_000, true, 4.0, 10.0, false)), None);
        assert_eq!(w.observe(&point(3_000, false, 5.0, 10.0, false)), None);
        assert!(!w.wants_drain_check());
        assert_eq!(w.observe(&point(4_000, true, 5.0, 10.0, false)), None);
        assert_eq!(w.observe(&point(5_000, true, 5.0, 20.0, false)), None);
        let r = w.observe(&point(6_000, true, 5.0, 30.0, true)).unwrap();
        assert_eq!(
            (r.running_ms, r.flowing_ms, r.drained_ms),
            (4_000, 5_000, 6_000)
        );
        assert_eq!(r.restarts, 2.0);
    }
}

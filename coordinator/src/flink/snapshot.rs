//! One consistent read of the figures the controller needs from a running job.

use std::time::Duration;

use super::checkpoints::{CheckpointStats, Distribution};
use super::client::FlinkClient;
use super::metrics::{
    AggregatedMetrics, Aggregation, JOB_HEALTH_METRICS, MetricValues, VERTEX_RATE_METRICS,
};
use super::types::{JobDetails, JobId, JobState, VertexId};
use crate::Result;

/// Maximum and mean over a vertex's subtasks; `None` when no subtask reported a number.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MaxAvg {
    pub max: Option<f64>,
    pub avg: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VertexSnapshot {
    pub id: VertexId,
    pub name: String,
    pub parallelism: u32,
    pub is_source: bool,
    /// Sum over subtasks, records/s (Flink's 60-s moving average).
    pub records_in_per_second: Option<f64>,
    pub records_out_per_second: Option<f64>,
    /// Milliseconds per second, 0..1000.
    pub busy_ms_per_second: MaxAvg,
    pub backpressured_ms_per_second: MaxAvg,
    pub idle_ms_per_second: MaxAvg,
}

/// The controller's view of a job at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct JobMetricsSnapshot {
    pub job_id: JobId,
    pub state: JobState,
    /// Sum of the sources' `numRecordsOutPerSecond`; `None` if no source reported it.
    pub input_rate: Option<f64>,
    pub vertices: Vec<VertexSnapshot>,
    pub num_restarts: Option<f64>,
    pub uptime_ms: Option<f64>,
    pub last_checkpoint_duration_ms: Option<f64>,
    pub last_checkpoint_size_bytes: Option<f64>,
    pub completed_checkpoints: Option<f64>,
    pub failed_checkpoints: Option<f64>,
    /// End-to-end checkpoint durations (ms) over the retained history.
    pub checkpoint_duration_ms: Option<Distribution>,
}

impl JobMetricsSnapshot {
    /// Assembles a snapshot from what the endpoints returned; pure, so testable from fixtures.
    pub fn from_parts(
        details: &JobDetails,
        vertex_metrics: &[(VertexId, AggregatedMetrics)],
        job_metrics: &MetricValues,
        checkpoints: Option<&CheckpointStats>,
    ) -> Self {
        let sources: Vec<&VertexId> = details.source_vertices().iter().map(|v| &v.id).collect();
        let empty = AggregatedMetrics::default();
        let vertices: Vec<VertexSnapshot> = details
            .vertices
            .iter()
            .map(|v| {
                let m = vertex_metrics
                    .iter()
                    .find(|(id, _)| *id == v.id)
                    .map_or(&empty, |(_, m)| m);
                let max_avg = |name: &str| MaxAvg {
                    max: m.get(name).and_then(|a| a.max),
                    avg: m.get(name).and_then(|a| a.avg),
                };
                VertexSnapshot {
                    id: v.id.clone(),
                    name: v.name.clone(),
                    parallelism: v.parallelism,
                    is_source: sources.contains(&&v.id),
                    records_in_per_second: m.get("numRecordsInPerSecond").and_then(|a| a.sum),
                    records_out_per_second: m.get("numRecordsOutPerSecond").and_then(|a| a.sum),
                    busy_ms_per_second: max_avg("busyTimeMsPerSecond"),
                    backpressured_ms_per_second: max_avg("backPressuredTimeMsPerSecond"),
                    idle_ms_per_second: max_avg("idleTimeMsPerSecond"),
                }
            })
            .collect();
        let source_rates: Vec<f64> = vertices
            .iter()
            .filter(|v| v.is_source)
            .filter_map(|v| v.records_out_per_second)
            .collect();
        Self {
            job_id: details.jid.clone(),
            state: details.state,
            input_rate: (!source_rates.is_empty()).then(|| source_rates.iter().sum()),
            vertices,
            num_restarts: job_metrics.number("numRestarts"),
            uptime_ms: job_metrics.number("uptime"),
            last_checkpoint_duration_ms: job_metrics.number("lastCheckpointDuration"),
            last_checkpoint_size_bytes: job_metrics.number("lastCheckpointSize"),
            completed_checkpoints: job_metrics.number("numberOfCompletedCheckpoints"),
            failed_checkpoints: job_metrics.number("numberOfFailedCheckpoints"),
            checkpoint_duration_ms: checkpoints.map(|c| c.summary.end_to_end_duration),
        }
    }
}

impl FlinkClient {
    /// Reads a [`JobMetricsSnapshot`]. Because the JobManager's metric store refreshes lazily,
    /// a non-zero `settle` first issues the same queries to trigger a fetch, sleeps `settle`
    /// (use a bit more than `metrics.fetcher.update-interval`), then reads. Pass zero when
    /// polling continuously at least that often: then every read is already fresh.
    pub async fn job_metrics_snapshot(
        &self,
        job: &JobId,
        settle: Duration,
    ) -> Result<JobMetricsSnapshot> {
        let details = self.job_details(job).await?;
        if !settle.is_zero() {
            self.read_job_metrics(job, &details).await?;
            tokio::time::sleep(settle).await;
        }
        self.job_metrics_snapshot_of(&details).await
    }

    /// [`Self::job_metrics_snapshot`] without settling, for a caller that just read the job's
    /// details itself (a poller reading every second): the details are not fetched twice.
    pub async fn job_metrics_snapshot_of(
        &self,
        details: &JobDetails,
    ) -> Result<JobMetricsSnapshot> {
        let job = &details.jid;
        let (vertex_metrics, job_metrics) = self.read_job_metrics(job, details).await?;
        let checkpoints = self.checkpoint_stats(job).await?;
        Ok(JobMetricsSnapshot::from_parts(
            details,
            &vertex_metrics,
            &job_metrics,
            Some(&checkpoints),
        ))
    }

    async fn read_job_metrics(
        &self,
        job: &JobId,
        details: &JobDetails,
    ) -> Result<(Vec<(VertexId, AggregatedMetrics)>, MetricValues)> {
        let aggs = [Aggregation::Sum, Aggregation::Max, Aggregation::Avg];
        let mut vertex_metrics = Vec::with_capacity(details.vertices.len());
        for v in &details.vertices {
            let m = self
                .vertex_subtask_metrics(job, &v.id, VERTEX_RATE_METRICS, &aggs)
                .await?;
            vertex_metrics.push((v.id.clone(), m));
        }
        let job_metrics = self.job_metrics(job, JOB_HEALTH_METRICS).await?;
        Ok((vertex_metrics, job_metrics))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::fixture;
    use super::*;

    fn job_metric_values() -> MetricValues {
        super::super::metrics::values_from(fixture("job_metrics.json"))
    }

    #[test]
    fn snapshot_from_captured_fixtures() {
        let details: JobDetails = fixture("job_details.json");
        let source = VertexId::from("6bf01baa9d2ca23a3ef7ce311722523d");
        let window = VertexId::from("01203aa9a12dc1ec725e03853dd7c8f2");
        let vertex_metrics = vec![
            (
                source.clone(),
                fixture("vertex_subtasks_metrics_source.json"),
            ),
            (
                window.clone(),
                fixture("vertex_subtasks_metrics_window.json"),
            ),
        ];
        let checkpoints: CheckpointStats = fixture("checkpoints.json");
        let s = JobMetricsSnapshot::from_parts(
            &details,
            &vertex_metrics,
            &job_metric_values(),
            Some(&checkpoints),
        );

        assert_eq!(s.state, JobState::Running);
        assert_eq!(s.input_rate, Some(86.95));
        assert_eq!(s.num_restarts, Some(0.0));
        assert_eq!(s.last_checkpoint_duration_ms, Some(46.0));
        assert_eq!(s.checkpoint_duration_ms.and_then(|d| d.max), Some(231.0));
        let w = s
            .vertices
            .iter()
            .find(|v| v.id == window)
            .expect("window vertex");
        assert!(!w.is_source);
        assert_eq!(w.records_in_per_second, Some(86.86666666666667));
        assert_eq!(
            w.idle_ms_per_second,
            MaxAvg {
                max: Some(1000.0),
                avg: Some(1000.0)
            }
        );
        assert_eq!(w.busy_ms_per_second.max, Some(0.0));
    }

    #[test]
    fn missing_metrics_leave_fields_empty_instead_of_zero() {
        let details: JobDetails = fixture("job_details.json");
        let s = JobMetricsSnapshot::from_parts(&details, &[], &MetricValues::default(), None);
        assert_eq!(s.input_rate, None);
        assert_eq!(s.num_restarts, None);
        assert_eq!(s.checkpoint_duration_ms, None);
        assert!(
            s.vertices
                .iter()
                .all(|v| v.busy_ms_per_second == MaxAvg::default())
        );
        assert_eq!(s.vertices.len(), 2);
    }
}

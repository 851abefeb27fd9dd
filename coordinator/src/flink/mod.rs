//! Typed async client for Apache Flink's REST API (checked against Flink 2.3.0).
//!
//! [`FlinkClient`] covers what the executor and the metric collector need: cluster and job
//! overviews, the JobManager's configuration (checked for settings that freeze metrics),
//! aggregated vertex / job / TaskManager / JobManager metrics, checkpoint statistics,
//! savepoints and stop-with-savepoint, jar upload and run, cancel, and adaptive-scheduler
//! resource requirements. Every failure is a [`crate::Error::Flink`] with a structured
//! [`crate::FlinkErrorKind`].
//!
//! Retries: only idempotent calls (GETs, `PUT resource-requirements`, cancel, jar delete) are
//! retried, with exponential backoff and jitter ([`RetryPolicy`]). POSTs that trigger a savepoint,
//! stop a job, upload or run a jar are sent exactly once, because a retry after a lost response
//! could act twice (stop twice, start a duplicate job).

mod checkpoints;
mod client;
mod cluster_config;
mod jars;
mod jobs;
mod metrics;
mod retry;
mod savepoints;
mod snapshot;
mod types;

pub use checkpoints::{
    CheckpointConfig, CheckpointCounts, CheckpointEntry, CheckpointStats, CheckpointSummary,
    Distribution, Externalization, LatestCheckpoints, RestoredCheckpoint,
};
pub use client::{ClientConfig, FlinkClient};
pub use cluster_config::{
    ClusterConfig, ConfigFinding, DEFAULT_FETCHER_INTERVAL, DEFAULT_WEB_TIMEOUT,
    MAX_FETCHER_INTERVAL, MAX_WEB_TIMEOUT, parse_flink_duration,
};
pub use jars::{JarEntry, JarFile, JarRunRequest};
pub use metrics::{
    AggregatedMetric, AggregatedMetrics, Aggregation, JOB_HEALTH_METRICS, JVM_METRICS, JvmMetrics,
    MetricValues, VERTEX_RATE_METRICS,
};
pub use retry::{Idempotency, RetryPolicy};
pub use savepoints::{
    SavepointFailure, SavepointFormat, SavepointRequest, SavepointStatus, StopRequest,
};
pub use snapshot::{JobMetricsSnapshot, MaxAvg, VertexSnapshot};
pub use types::{
    ClusterOverview, DashboardConfig, JarId, JobDetails, JobId, JobOverview, JobPlan, JobState,
    JobVertex, ParallelismBounds, PlanInput, PlanNode, ResourceRequirements, TaskManagerHardware,
    TaskManagerId, TaskManagerInfo, TaskManagerMemory, TriggerId, VertexId,
    VertexResourceRequirement, VertexSummaryMetrics, VertexTaskManager, VertexTaskManagers,
};

/// Decodes `coordinator/testdata/flink/<name>`, JSON captured from a real Flink 2.3 cluster.
#[cfg(test)]
#[allow(clippy::expect_used)]
pub(crate) fn fixture<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = format!("{}/testdata/flink/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).expect(&path);
    client::decode("fixture", &bytes).expect(&path)
}

//! Metric endpoints of the JobManager's metric store, and typed views over them.
//!
//! The store is refreshed lazily: a query returns what the previous fetch got and only triggers a
//! new fetch if that is older than `metrics.fetcher.update-interval`. One-off readers therefore
//! prime, wait a little longer than that interval, and read again (see [`super::snapshot`]).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::client::{FlinkClient, Target};
use super::types::{JobId, TaskManagerId, VertexId, lenient_f64};
use crate::Result;

/// Values of `GET …/metrics?get=a,b`: Flink sends every value as text; names it does not know
/// are simply absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricValues(pub BTreeMap<String, String>);

impl MetricValues {
    /// The value as a finite number; `None` if absent, non-numeric or NaN.
    pub fn number(&self, name: &str) -> Option<f64> {
        self.0
            .get(name)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct MetricEntry {
    id: String,
    /// Missing when listing names without `get`.
    #[serde(default)]
    value: Option<String>,
}

/// How to aggregate a metric over subtasks (or TaskManagers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    Min,
    Max,
    Avg,
    Sum,
    Skew,
}

impl Aggregation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Min => "min",
            Self::Max => "max",
            Self::Avg => "avg",
            Self::Sum => "sum",
            Self::Skew => "skew",
        }
    }
}

/// One metric aggregated over subtasks. Aggregates not requested, or NaN, are `None`; Flink
/// leaves subtasks that report NaN (e.g. a source reader without a split) out of the aggregate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AggregatedMetric {
    pub id: String,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub min: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub max: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub avg: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub sum: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub skew: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct AggregatedMetrics(pub Vec<AggregatedMetric>);

impl AggregatedMetrics {
    pub fn get(&self, name: &str) -> Option<&AggregatedMetric> {
        self.0.iter().find(|m| m.id == name)
    }
}

/// Task-level metric names (Flink 2.3) a controller reads per vertex.
pub const VERTEX_RATE_METRICS: &[&str] = &[
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "idleTimeMsPerSecond",
];

/// Job-level metric names read by the snapshot.
pub const JOB_HEALTH_METRICS: &[&str] = &[
    "numRestarts",
    "uptime",
    "downtime",
    "restartingTime",
    "lastCheckpointDuration",
    "lastCheckpointSize",
    "numberOfCompletedCheckpoints",
    "numberOfFailedCheckpoints",
];

/// JVM metric names shared by JobManager and TaskManagers (G1 collector names as on Java 17).
pub const JVM_METRICS: &[&str] = &[
    "Status.JVM.Memory.Heap.Used",
    "Status.JVM.Memory.Heap.Committed",
    "Status.JVM.Memory.Heap.Max",
    "Status.JVM.CPU.Load",
    "Status.JVM.GarbageCollector.G1_Young_Generation.Count",
    "Status.JVM.GarbageCollector.G1_Young_Generation.Time",
    "Status.JVM.GarbageCollector.G1_Old_Generation.Count",
    "Status.JVM.GarbageCollector.G1_Old_Generation.Time",
    "Status.JVM.Threads.Count",
];

/// A JVM's memory, CPU and GC figures; `None` where the JVM did not report the metric.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JvmMetrics {
    pub heap_used_bytes: Option<f64>,
    pub heap_committed_bytes: Option<f64>,
    pub heap_max_bytes: Option<f64>,
    /// Process CPU normalised to 0..1 over all cores.
    pub cpu_load: Option<f64>,
    pub young_gc_count: Option<f64>,
    pub young_gc_time_ms: Option<f64>,
    pub old_gc_count: Option<f64>,
    pub old_gc_time_ms: Option<f64>,
    pub threads: Option<f64>,
}

impl JvmMetrics {
    pub fn from_values(v: &MetricValues) -> Self {
        let [
            heap_used,
            heap_committed,
            heap_max,
            cpu,
            young_n,
            young_t,
            old_n,
            old_t,
            threads,
        ] = [0, 1, 2, 3, 4, 5, 6, 7, 8].map(|i| v.number(JVM_METRICS[i]));
        Self {
            heap_used_bytes: heap_used,
            heap_committed_bytes: heap_committed,
            heap_max_bytes: heap_max,
            cpu_load: cpu,
            young_gc_count: young_n,
            young_gc_time_ms: young_t,
            old_gc_count: old_n,
            old_gc_time_ms: old_t,
            threads,
        }
    }
}

fn subtask_metrics_path<'a>(job: &'a JobId, vertex: &'a VertexId) -> [&'a str; 6] {
    [
        "jobs",
        job.as_str(),
        "vertices",
        vertex.as_str(),
        "subtasks",
        "metrics",
    ]
}

fn names_query(names: &[&str]) -> String {
    names.join(",")
}

pub(crate) fn values_from(entries: Vec<MetricEntry>) -> MetricValues {
    MetricValues(
        entries
            .into_iter()
            .filter_map(|e| e.value.map(|v| (e.id, v)))
            .collect(),
    )
}

impl FlinkClient {
    async fn metric_values(
        &self,
        op: &'static str,
        segments: &[&str],
        names: &[&str],
        job: Option<&JobId>,
    ) -> Result<MetricValues> {
        let get = names_query(names);
        let entries: Vec<MetricEntry> = self
            .get_json(Target {
                op,
                segments,
                query: &[("get", &get)],
                job,
            })
            .await?;
        Ok(values_from(entries))
    }

    /// `GET /jobs/<id>/metrics?get=…`: job-level metrics such as `numRestarts`.
    pub async fn job_metrics(&self, job: &JobId, names: &[&str]) -> Result<MetricValues> {
        self.metric_values(
            "job_metrics",
            &["jobs", job.as_str(), "metrics"],
            names,
            Some(job),
        )
        .await
    }

    /// `GET /jobs/<id>/vertices/<vid>/subtasks/metrics?get=…&agg=…`: task metrics of one
    /// vertex aggregated over its subtasks. Operator metrics are named `<operator>.<metric>`
    /// with spaces as `_` (e.g. `Source__gen.numRecordsOut`).
    pub async fn vertex_subtask_metrics(
        &self,
        job: &JobId,
        vertex: &VertexId,
        names: &[&str],
        aggregations: &[Aggregation],
    ) -> Result<AggregatedMetrics> {
        let get = names_query(names);
        let agg = aggregations
            .iter()
            .map(|a| a.as_str())
            .collect::<Vec<_>>()
            .join(",");
        self.get_json(Target {
            op: "vertex_subtask_metrics",
            segments: &subtask_metrics_path(job, vertex),
            query: &[("get", &get), ("agg", &agg)],
            job: Some(job),
        })
        .await
    }

    /// `GET /jobs/<id>/vertices/<vid>/subtasks/metrics`: the ids of the metrics a vertex's
    /// subtasks report. Worth knowing before asking: Flink answers a `get=` list naming one
    /// unknown metric with nothing at all, not with the others.
    pub async fn vertex_subtask_metric_ids(
        &self,
        job: &JobId,
        vertex: &VertexId,
    ) -> Result<Vec<String>> {
        let listed: AggregatedMetrics = self
            .get_json(Target {
                op: "vertex_subtask_metric_ids",
                segments: &subtask_metrics_path(job, vertex),
                query: &[],
                job: Some(job),
            })
            .await?;
        Ok(listed.0.into_iter().map(|m| m.id).collect())
    }

    /// `GET /taskmanagers/<id>/metrics?get=…`.
    pub async fn taskmanager_metrics(
        &self,
        tm: &TaskManagerId,
        names: &[&str],
    ) -> Result<MetricValues> {
        self.metric_values(
            "taskmanager_metrics",
            &["taskmanagers", tm.as_str(), "metrics"],
            names,
            None,
        )
        .await
    }

    /// `GET /jobmanager/metrics?get=…` (JVM names plus e.g. `numRegisteredTaskManagers`).
    pub async fn jobmanager_metrics(&self, names: &[&str]) -> Result<MetricValues> {
        self.metric_values(
            "jobmanager_metrics",
            &["jobmanager", "metrics"],
            names,
            None,
        )
        .await
    }

    /// JVM heap, CPU and GC of one TaskManager.
    pub async fn taskmanager_jvm(&self, tm: &TaskManagerId) -> Result<JvmMetrics> {
        Ok(JvmMetrics::from_values(
            &self.taskmanager_metrics(tm, JVM_METRICS).await?,
        ))
    }

    /// JVM heap, CPU and GC of the JobManager.
    pub async fn jobmanager_jvm(&self) -> Result<JvmMetrics> {
        Ok(JvmMetrics::from_values(
            &self.jobmanager_metrics(JVM_METRICS).await?,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn decodes_aggregated_vertex_metrics() {
        let m: AggregatedMetrics = fixture("vertex_subtasks_metrics_source.json");
        let out = m.get("numRecordsOutPerSecond").expect("present");
        assert_eq!(out.sum, Some(86.95));
        assert_eq!(out.max, Some(43.483333333333334));
        assert_eq!(out.min, None, "min was not requested");
        assert_eq!(
            m.get("idleTimeMsPerSecond").and_then(|m| m.avg),
            Some(1000.0)
        );
        assert!(m.get("noSuchMetric").is_none());
    }

    #[test]
    fn nan_aggregates_are_none() {
        let m: AggregatedMetrics =
            serde_json::from_str(r#"[{"id":"x","max":"NaN","avg":1.5,"sum":"7"}]"#)
                .expect("decode");
        let x = m.get("x").expect("x");
        assert_eq!((x.max, x.avg, x.sum), (None, Some(1.5), Some(7.0)));
    }

    #[test]
    fn decodes_job_and_jvm_metric_values() {
        let entries: Vec<MetricEntry> = fixture("job_metrics.json");
        let job = values_from(entries);
        assert_eq!(job.number("numRestarts"), Some(0.0));
        assert_eq!(job.number("numberOfCompletedCheckpoints"), Some(8.0));
        assert_eq!(job.number("lastCheckpointDuration"), Some(46.0));

        let tm = JvmMetrics::from_values(&values_from(fixture("taskmanager_metrics.json")));
        assert_eq!(tm.heap_max_bytes, Some(343_932_928.0));
        assert_eq!(tm.young_gc_count, Some(6.0));
        assert_eq!(tm.old_gc_time_ms, Some(0.0));
        assert!(tm.cpu_load.is_some_and(|l| (0.0..=1.0).contains(&l)));
        assert_eq!(tm.heap_committed_bytes, None, "not in the fixture");

        let jm = values_from(fixture("jobmanager_metrics.json"));
        assert_eq!(jm.number("numRegisteredTaskManagers"), Some(1.0));
        assert_eq!(jm.number("taskSlotsTotal"), Some(2.0));
    }

    #[test]
    fn metric_listing_without_values_decodes_to_empty() {
        let entries: Vec<MetricEntry> = fixture("taskmanager_metrics_list.json");
        assert!(
            entries
                .iter()
                .any(|e| e.id == "Status.JVM.GarbageCollector.G1_Old_Generation.Time")
        );
        assert!(values_from(entries).0.is_empty());
    }

    #[test]
    fn non_numeric_and_nan_values_are_not_numbers() {
        let v = MetricValues(
            [("a", "NaN"), ("b", "file:/x/chk-1"), ("c", "-1")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into(),
        );
        assert_eq!(
            (v.number("a"), v.number("b"), v.number("c")),
            (None, None, Some(-1.0))
        );
        assert_eq!(v.text("b"), Some("file:/x/chk-1"));
    }
}

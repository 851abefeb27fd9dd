//! Checkpoint statistics and configuration (`/jobs/<id>/checkpoints[/config]`).

use serde::Deserialize;

use super::client::{FlinkClient, Target};
use super::types::{JobId, lenient_f64};
use crate::Result;

/// `GET /jobs/<id>/checkpoints` without the per-checkpoint history.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CheckpointStats {
    pub counts: CheckpointCounts,
    pub summary: CheckpointSummary,
    pub latest: LatestCheckpoints,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct CheckpointCounts {
    pub restored: u64,
    pub total: u64,
    pub in_progress: u64,
    pub completed: u64,
    pub failed: u64,
}

/// Distributions over the retained completed checkpoints.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CheckpointSummary {
    /// Milliseconds from trigger to the last acknowledgement.
    pub end_to_end_duration: Distribution,
    /// Bytes written by the checkpoint (incremental size).
    pub checkpointed_size: Distribution,
    /// Bytes of full state.
    pub state_size: Distribution,
}

/// Min/avg/max and percentiles; `None` where Flink has nothing (no checkpoint yet) or NaN.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Distribution {
    #[serde(default, deserialize_with = "lenient_f64")]
    pub min: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub max: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub avg: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub p50: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub p90: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub p99: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LatestCheckpoints {
    pub completed: Option<CheckpointEntry>,
    pub savepoint: Option<CheckpointEntry>,
    pub failed: Option<CheckpointEntry>,
    pub restored: Option<RestoredCheckpoint>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CheckpointEntry {
    pub id: u64,
    pub status: String,
    pub is_savepoint: bool,
    pub trigger_timestamp: i64,
    #[serde(default)]
    pub end_to_end_duration: Option<u64>,
    #[serde(default)]
    pub checkpointed_size: Option<u64>,
    #[serde(default)]
    pub external_path: Option<String>,
    #[serde(default)]
    pub failure_message: Option<String>,
}

/// What the job started from: the checkpoint or savepoint it restored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RestoredCheckpoint {
    pub id: u64,
    pub restore_timestamp: i64,
    pub is_savepoint: bool,
    pub external_path: Option<String>,
}

/// `GET /jobs/<id>/checkpoints/config`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CheckpointConfig {
    pub mode: String,
    /// Milliseconds; `i64::MAX` style huge values mean "periodic checkpoints disabled".
    pub interval: i64,
    pub timeout: i64,
    pub min_pause: i64,
    pub max_concurrent: i64,
    pub externalization: Externalization,
    #[serde(default)]
    pub state_backend: Option<String>,
    #[serde(default)]
    pub checkpoint_storage: Option<String>,
    #[serde(default)]
    pub unaligned_checkpoints: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Externalization {
    pub enabled: bool,
    pub delete_on_cancellation: bool,
}

impl FlinkClient {
    /// `GET /jobs/<id>/checkpoints`: counts, duration/size distributions, latest entries.
    pub async fn checkpoint_stats(&self, job: &JobId) -> Result<CheckpointStats> {
        self.get_json(Target {
            op: "checkpoint_stats",
            segments: &["jobs", job.as_str(), "checkpoints"],
            query: &[],
            job: Some(job),
        })
        .await
    }

    /// `GET /jobs/<id>/checkpoints/config`: interval, timeout, mode, retention.
    pub async fn checkpoint_config(&self, job: &JobId) -> Result<CheckpointConfig> {
        self.get_json(Target {
            op: "checkpoint_config",
            segments: &["jobs", job.as_str(), "checkpoints", "config"],
            query: &[],
            job: Some(job),
        })
        .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn decodes_stats_of_a_fresh_job() {
        let s: CheckpointStats = fixture("checkpoints.json");
        assert_eq!(s.counts.completed, 9);
        assert_eq!(s.counts.failed, 0);
        assert_eq!(s.summary.end_to_end_duration.max, Some(231.0));
        assert_eq!(s.summary.end_to_end_duration.p50, Some(47.0));
        let latest = s.latest.completed.expect("a completed checkpoint");
        assert_eq!(latest.id, 9);
        assert!(latest.external_path.is_some_and(|p| p.ends_with("/chk-9")));
        assert_eq!(s.latest.restored, None);
    }

    #[test]
    fn decodes_restore_from_savepoint() {
        let s: CheckpointStats = fixture("checkpoints_restored.json");
        let restored = s.latest.restored.expect("restored");
        assert!(restored.is_savepoint);
        assert!(
            restored
                .external_path
                .is_some_and(|p| p.contains("/savepoints/savepoint-"))
        );
    }

    #[test]
    fn decodes_config_with_interval_from_flink_configuration() {
        let c: CheckpointConfig = fixture("checkpoints_config.json");
        assert_eq!(c.interval, 3000);
        assert_eq!(c.mode, "exactly_once");
        assert!(c.externalization.enabled && !c.externalization.delete_on_cancellation);
        assert_eq!(c.state_backend.as_deref(), Some("HashMapStateBackend"));
    }

    #[test]
    fn nan_and_missing_distribution_values_are_none() {
        let d: Distribution =
            serde_json::from_str(r#"{"min":0,"max":"NaN","avg":null,"p50":"12.5"}"#)
                .expect("decode");
        assert_eq!(
            (d.min, d.max, d.avg, d.p50, d.p90),
            (Some(0.0), None, None, Some(12.5), None)
        );
    }
}

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

impl LatestCheckpoints {
    /// Where a job that ended (cancelled, failed) starts again without losing or repeating
    /// committed output: its newest completed checkpoint or savepoint that has a path. A job
    /// that never completed one committed nothing since the snapshot it started from, so that
    /// snapshot (a job cancelled seconds after a restart used to have no restore point at all).
    pub fn restore_point(&self) -> Option<String> {
        let completed = || {
            [self.completed.as_ref(), self.savepoint.as_ref()]
                .into_iter()
                .flatten()
                .filter(|e| e.status == "COMPLETED")
        };
        if completed().next().is_none() {
            return self.restored.as_ref().and_then(|r| r.external_path.clone());
        }
        completed()
            .filter(|e| e.external_path.is_some())
            .max_by_key(|e| e.id)
            .and_then(|e| e.external_path.clone())
    }
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
    fn the_restore_point_is_the_newest_completed_snapshot_else_what_the_job_started_from() {
        let s: CheckpointStats = fixture("checkpoints_restored.json");
        let newest = s.latest.restore_point().unwrap();
        assert!(newest.ends_with("/chk-23"), "{newest}");

        // Cancelled before its first checkpoint: the savepoint it was started from.
        let mut fresh = s.latest.clone();
        fresh.completed = None;
        let started_from = fresh.restore_point().unwrap();
        assert!(
            started_from.contains("/savepoints/savepoint-"),
            "{started_from}"
        );

        // A newer savepoint wins over an older checkpoint.
        let mut saved = s.latest.clone();
        let mut savepoint = s.latest.completed.clone().unwrap();
        savepoint.id = 24;
        savepoint.is_savepoint = true;
        savepoint.external_path = Some("file:/sp/savepoint-24".into());
        saved.savepoint = Some(savepoint);
        assert_eq!(
            saved.restore_point().as_deref(),
            Some("file:/sp/savepoint-24")
        );

        // A job that completed a checkpoint never goes back to its start: output after it may
        // be committed. Without a path to that checkpoint there is no restore point.
        let mut pathless = s.latest.clone();
        pathless.completed.as_mut().unwrap().external_path = None;
        assert_eq!(pathless.restore_point(), None);

        // A fresh job that restored nothing has nothing to go back to.
        let s: CheckpointStats = fixture("checkpoints.json");
        let mut never = s.latest.clone();
        never.completed = None;
        assert_eq!(never.restore_point(), None);
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

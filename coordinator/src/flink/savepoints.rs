//! Savepoints and stop-with-savepoint: trigger once, then poll the asynchronous operation.

use std::time::Duration;

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::client::{FlinkClient, Target, decode};
use super::retry::Idempotency;
use super::types::{JobId, TriggerId};
use crate::{Error, FlinkErrorKind, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SavepointFormat {
    /// Portable between state backends; what a rescale-by-restart should use.
    Canonical,
    /// The backend's own format; faster, but tied to the backend.
    Native,
}

/// Body of `POST /jobs/<id>/savepoints` (the job keeps running).
#[derive(Debug, Clone, PartialEq)]
pub struct SavepointRequest {
    /// `file:///…` directory; `None` uses the cluster's `execution.checkpointing.savepoint-dir`.
    pub target_directory: Option<String>,
    pub format: Option<SavepointFormat>,
}

/// Body of `POST /jobs/<id>/stop` (savepoint, then the job finishes).
#[derive(Debug, Clone, PartialEq)]
pub struct StopRequest {
    pub target_directory: Option<String>,
    /// Emit MAX_WATERMARK and flush windows before stopping (changes results; normally false).
    pub drain: bool,
    pub format: Option<SavepointFormat>,
}

// Flink spells the directory key differently in the two bodies (`target-directory` vs
// `targetDirectory`), hence two wire structs.
#[derive(Serialize)]
struct SavepointBody<'a> {
    #[serde(rename = "target-directory", skip_serializing_if = "Option::is_none")]
    target_directory: Option<&'a str>,
    #[serde(rename = "cancel-job")]
    cancel_job: bool,
    #[serde(rename = "formatType", skip_serializing_if = "Option::is_none")]
    format: Option<SavepointFormat>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StopBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    target_directory: Option<&'a str>,
    drain: bool,
    #[serde(rename = "formatType", skip_serializing_if = "Option::is_none")]
    format: Option<SavepointFormat>,
}

#[derive(Deserialize)]
struct TriggerResponse {
    #[serde(rename = "request-id")]
    request_id: TriggerId,
}

/// Where a savepoint operation stands.
#[derive(Debug, Clone, PartialEq)]
pub enum SavepointStatus {
    InProgress,
    /// `location` is what `savepointPath` of a jar run takes, e.g. `file:/…/savepoint-abc-123`.
    Completed {
        location: String,
    },
    Failed(SavepointFailure),
}

/// Flink's failure cause, reduced to the lines that explain it.
#[derive(Debug, Clone, PartialEq)]
pub struct SavepointFailure {
    pub class: String,
    pub message: String,
    pub root_cause: String,
}

#[derive(Deserialize)]
struct RawStatus {
    status: RawStatusId,
    operation: Option<RawOperation>,
}

#[derive(Deserialize)]
struct RawStatusId {
    id: String,
}

#[derive(Deserialize)]
struct RawOperation {
    location: Option<String>,
    #[serde(rename = "failure-cause")]
    failure_cause: Option<RawFailure>,
}

#[derive(Deserialize)]
struct RawFailure {
    class: Option<String>,
    #[serde(rename = "stack-trace")]
    stack_trace: Option<String>,
}

impl SavepointStatus {
    /// Interprets the body of `GET /jobs/<id>/savepoints/<trigger>`. Flink reports a failed
    /// savepoint as status `COMPLETED` with a `failure-cause`, not with a FAILED status.
    pub fn parse(op: &'static str, body: &[u8]) -> Result<Self> {
        Self::from_raw(op, decode(op, body)?)
    }

    fn from_raw(op: &'static str, raw: RawStatus) -> Result<Self> {
        match raw.status.id.as_str() {
            "IN_PROGRESS" => Ok(Self::InProgress),
            "COMPLETED" => {
                let operation = raw.operation.unwrap_or(RawOperation {
                    location: None,
                    failure_cause: None,
                });
                match (operation.failure_cause, operation.location) {
                    (Some(cause), _) => Ok(Self::Failed(SavepointFailure::from_raw(cause))),
                    (None, Some(location)) => Ok(Self::Completed { location }),
                    (None, None) => Ok(Self::Failed(SavepointFailure {
                        class: String::new(),
                        message: "completed without a location or a failure cause".into(),
                        root_cause: String::new(),
                    })),
                }
            }
            other => Err(Error::Flink {
                op,
                kind: FlinkErrorKind::Decode {
                    message: format!("unknown savepoint status {other:?}"),
                },
            }),
        }
    }
}

impl SavepointFailure {
    fn from_raw(raw: RawFailure) -> Self {
        let trace = raw.stack_trace.unwrap_or_default();
        let message = trace.lines().next().unwrap_or_default().trim().to_owned();
        let root_cause = trace
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("Caused by:"))
            .map_or_else(|| message.clone(), |l| l.trim().to_owned());
        Self {
            class: raw.class.unwrap_or_default(),
            message,
            root_cause,
        }
    }
}

impl FlinkClient {
    /// `POST /jobs/<id>/savepoints`. Sent once, never retried: a lost response must not start
    /// a second savepoint.
    pub async fn trigger_savepoint(
        &self,
        job: &JobId,
        request: &SavepointRequest,
    ) -> Result<TriggerId> {
        let body = SavepointBody {
            target_directory: request.target_directory.as_deref(),
            cancel_job: false,
            format: request.format,
        };
        self.post_trigger("trigger_savepoint", job, "savepoints", &body)
            .await
    }

    /// `POST /jobs/<id>/stop`: stop-with-savepoint. Sent once, never retried: a retried stop
    /// could act twice. Poll with [`Self::wait_savepoint`]; the job then goes to FINISHED.
    pub async fn stop_with_savepoint(
        &self,
        job: &JobId,
        request: &StopRequest,
    ) -> Result<TriggerId> {
        let body = StopBody {
            target_directory: request.target_directory.as_deref(),
            drain: request.drain,
            format: request.format,
        };
        self.post_trigger("stop_with_savepoint", job, "stop", &body)
            .await
    }

    /// Sends an operation-starting POST exactly once and returns its trigger id.
    async fn post_trigger<B: Serialize>(
        &self,
        op: &'static str,
        job: &JobId,
        action: &str,
        body: &B,
    ) -> Result<TriggerId> {
        let target = Target {
            op,
            segments: &["jobs", job.as_str(), action],
            query: &[],
            job: Some(job),
        };
        let response: TriggerResponse = self
            .call_json(Method::POST, target, Some(body), Idempotency::SendOnce)
            .await?;
        Ok(response.request_id)
    }

    /// `GET /jobs/<id>/savepoints/<trigger>`: status of a savepoint or stop operation.
    pub async fn savepoint_status(
        &self,
        job: &JobId,
        trigger: &TriggerId,
    ) -> Result<SavepointStatus> {
        let op = "savepoint_status";
        let raw: RawStatus = self
            .get_json(Target {
                op,
                segments: &["jobs", job.as_str(), "savepoints", trigger.as_str()],
                query: &[],
                job: Some(job),
            })
            .await?;
        SavepointStatus::from_raw(op, raw)
    }

    /// Polls every `poll` until the operation ends or another poll would overrun `deadline`
    /// (one slow status request can still run past it, by up to the request timeout and its
    /// retries). Returns the
    /// savepoint location; a failed savepoint is `FlinkErrorKind::SavepointFailed` with Flink's
    /// cause, an unfinished one `SavepointDeadline` (it may still complete later).
    pub async fn wait_savepoint(
        &self,
        job: &JobId,
        trigger: &TriggerId,
        deadline: Duration,
        poll: Duration,
    ) -> Result<String> {
        let started = tokio::time::Instant::now();
        loop {
            match self.savepoint_status(job, trigger).await? {
                SavepointStatus::Completed { location } => return Ok(location),
                SavepointStatus::Failed(f) => {
                    return Err(Error::Flink {
                        op: "wait_savepoint",
                        kind: FlinkErrorKind::SavepointFailed {
                            class: f.class,
                            message: f.message,
                            root_cause: f.root_cause,
                        },
                    });
                }
                SavepointStatus::InProgress => {}
            }
            let waited = started.elapsed();
            if waited + poll > deadline {
                return Err(Error::Flink {
                    op: "wait_savepoint",
                    kind: FlinkErrorKind::SavepointDeadline { waited },
                });
            }
            tokio::time::sleep(poll).await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parse_fixture(name: &str) -> SavepointStatus {
        let path = format!("{}/testdata/flink/{name}", env!("CARGO_MANIFEST_DIR"));
        SavepointStatus::parse("test", &std::fs::read(&path).expect(&path)).expect(&path)
    }

    #[test]
    fn parses_captured_statuses() {
        assert_eq!(
            parse_fixture("savepoint_in_progress.json"),
            SavepointStatus::InProgress
        );
        match parse_fixture("stop_completed.json") {
            SavepointStatus::Completed { location } => {
                assert!(location.starts_with("file:/") && location.contains("savepoint-df04a0-"));
            }
            other => panic!("expected completed, got {other:?}"),
        }
    }

    #[test]
    fn failed_savepoint_carries_flinks_root_cause() {
        let SavepointStatus::Failed(f) = parse_fixture("savepoint_failed.json") else {
            panic!("expected failure");
        };
        assert_eq!(f.class, "java.util.concurrent.CompletionException");
        assert!(f.message.contains("IO-problem detected"), "{}", f.message);
        assert_eq!(
            f.root_cause,
            "java.io.IOException: Failed to create savepoint directory at file:/proc/nope"
        );
    }

    #[test]
    fn bodies_use_flinks_two_spellings_of_the_directory_key() {
        let dir = Some("file:///sp");
        let sp = serde_json::to_value(SavepointBody {
            target_directory: dir,
            cancel_job: false,
            format: Some(SavepointFormat::Canonical),
        })
        .expect("encode");
        assert_eq!(
            sp,
            serde_json::json!({"target-directory":"file:///sp","cancel-job":false,"formatType":"CANONICAL"})
        );
        let stop = serde_json::to_value(StopBody {
            target_directory: dir,
            drain: false,
            format: None,
        })
        .expect("encode");
        assert_eq!(
            stop,
            serde_json::json!({"targetDirectory":"file:///sp","drain":false})
        );
    }

    #[test]
    fn unknown_status_is_a_decode_error() {
        let err = SavepointStatus::parse("t", br#"{"status":{"id":"WEIRD"}}"#).expect_err("weird");
        assert!(matches!(
            err,
            Error::Flink {
                kind: FlinkErrorKind::Decode { .. },
                ..
            }
        ));
    }
}

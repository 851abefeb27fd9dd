//! The coordinator library's one error type.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid input in {path}: {message}")]
    InvalidFile { path: PathBuf, message: String },
    /// A rate trace (`timestamp|value` CSV) that does not parse; `line` is 1-based.
    #[error("rate trace line {line}: {message}")]
    Trace { line: usize, message: String },
    #[error("model: {0}")]
    Model(String),
    #[error("policy: {0}")]
    Policy(String),
    #[error("store: {0}")]
    Store(String),
    #[error(transparent)]
    Protocol(#[from] demeter_common::Error),
    #[error("agent {agent} is not connected")]
    AgentNotConnected { agent: String },
    /// The executor refused or could not carry out a reconfiguration.
    #[error("executor: {0}")]
    Executor(String),
    /// A Flink REST call failed; `op` names the client operation (e.g. `job_details`).
    #[error("Flink REST {op}: {kind}")]
    Flink {
        op: &'static str,
        kind: FlinkErrorKind,
    },
}

/// Why a Flink REST operation failed, structured so callers can react (retry, roll back, alert).
#[derive(Debug, Clone, PartialEq)]
pub enum FlinkErrorKind {
    /// No complete response within the per-request timeout (after any retries).
    Timeout { after: Duration },
    /// Could not connect, or the connection broke before a complete response.
    Connect { message: String },
    /// Flink answered with a non-success status; `body` is Flink's error summary.
    Status { code: u16, body: String },
    /// The response was not the JSON this client expects.
    Decode { message: String },
    /// The savepoint (or stop-with-savepoint) ended with a failure reported by Flink.
    SavepointFailed {
        class: String,
        message: String,
        root_cause: String,
    },
    /// The savepoint did not finish before the caller's deadline; it may still complete.
    SavepointDeadline { waited: Duration },
    /// Flink does not know the job (404 naming the job).
    JobNotFound { job_id: String },
    /// The request could not be built (bad base URL, unreadable jar, unsupported scheme).
    InvalidRequest { message: String },
}

impl std::fmt::Display for FlinkErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout { after } => write!(f, "timed out after {after:?}"),
            Self::Connect { message } => write!(f, "connection failed: {message}"),
            Self::Status { code, body } => write!(f, "HTTP {code}: {body}"),
            Self::Decode { message } => write!(f, "unexpected response: {message}"),
            Self::SavepointFailed {
                class,
                message,
                root_cause,
            } => {
                write!(
                    f,
                    "savepoint failed ({class}): {message}; root cause: {root_cause}"
                )
            }
            Self::SavepointDeadline { waited } => {
                write!(f, "savepoint not finished after {waited:?}")
            }
            Self::JobNotFound { job_id } => write!(f, "job {job_id} not found"),
            Self::InvalidRequest { message } => write!(f, "invalid request: {message}"),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

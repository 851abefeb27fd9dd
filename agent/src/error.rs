//! The agent library's one error type.

use std::path::PathBuf;

/// Everything the agent library can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file under /proc or /tmp could not be read (the process may have exited).
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A /proc file did not have the expected shape.
    #[error("malformed {file}: {reason}")]
    ProcFormat {
        file: &'static str,
        reason: &'static str,
    },
    /// A HotSpot performance-counter file is truncated, corrupted or of an unknown version.
    #[error("malformed hsperfdata at byte {offset}: {reason}")]
    Hsperf { offset: usize, reason: &'static str },
    /// A counter `jstat -gc` needs is absent from the hsperfdata file.
    #[error("hsperfdata lacks counter {0}")]
    MissingCounter(&'static str),
    /// A TaskManager order was refused (unknown id, …).
    #[error(transparent)]
    Refused(#[from] crate::supervisor::state::Refusal),
    /// A TaskManager spec this agent cannot run as given.
    #[error("invalid TaskManager spec: {0}")]
    InvalidSpec(String),
    /// A command the supervisor ran (systemctl) failed.
    #[error("{command}: {reason}")]
    Command { command: String, reason: String },
    /// The supervisor's own state is unusable.
    #[error("supervisor: {0}")]
    Supervisor(String),
    /// sysinfo could not initialise its view of the host.
    #[error("host metrics: {0}")]
    Host(#[from] sysinfo::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

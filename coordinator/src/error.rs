//! The coordinator library's one error type.

use std::path::PathBuf;

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
    #[error("model: {0}")]
    Model(String),
    #[error("store: {0}")]
    Store(String),
    #[error(transparent)]
    Protocol(#[from] demeter_common::Error),
    #[error("agent {agent} is not connected")]
    AgentNotConnected { agent: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

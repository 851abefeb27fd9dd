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
    /// A rate trace (`timestamp|value` CSV) that does not parse; `line` is 1-based.
    #[error("rate trace line {line}: {message}")]
    Trace { line: usize, message: String },
    #[error("model: {0}")]
    Model(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The common library's one error type.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    #[error("empty frame")]
    EmptyFrame,
    #[error("malformed frame: {0}")]
    Decode(String),
    #[error("cannot encode message: {0}")]
    Encode(String),
    #[error("malformed frame: {extra} bytes after the message")]
    TrailingBytes { extra: usize },
    #[error("not a Demeter stream: preamble starts with {got:02x?}")]
    BadMagic { got: [u8; 4] },
    #[error("unsupported protocol version {got}; this build speaks version {supported}")]
    UnsupportedVersion { got: u16, supported: u16 },
    #[error("unexpected message: expected {expected}, got {got}")]
    UnexpectedMessage { expected: &'static str, got: String },
    #[error("stream ended {0}")]
    StreamClosed(&'static str),
    #[error("QUIC stream: {0}")]
    Stream(String),
    #[error("QUIC connection: {0}")]
    Connection(#[from] quinn::ConnectionError),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("certificate: {0}")]
    Certificate(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Config { path: PathBuf, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

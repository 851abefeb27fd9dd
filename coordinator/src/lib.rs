//! The Demeter coordinator as a library: ingest, store, models, policy and the Flink executor.
//! The binary in `main.rs` is a thin shell around it.

pub mod config;
pub mod error;
pub mod executor;
pub mod flink;
pub mod ingest;
pub mod models;
pub mod observe;
pub mod policy;
pub mod profiler;
pub mod store;
pub mod trace;
pub mod tuner;
pub mod twin;

pub use error::{Error, FlinkErrorKind, Result};

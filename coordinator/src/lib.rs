//! The Demeter coordinator as a library: ingest, store, models, policy and the Flink executor.
//! The binary in `main.rs` is a thin shell around it.

pub mod error;
pub mod models;
pub mod trace;

pub use error::{Error, Result};

//! The Demeter node agent as a library: collectors that sample the host and Flink TaskManager
//! JVMs, the outbox of unsent samples, the connection to the coordinator and order handling.
//! `main.rs` is the thin binary around it.

pub mod backoff;
pub mod client;
pub mod collectors;
pub mod config;
pub mod error;
pub mod orders;
pub mod outbox;
pub mod supervisor;

pub use error::{Error, Result};

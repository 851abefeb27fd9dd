//! Demeter node agent library: collectors that sample the host and Flink TaskManager JVMs.
//!
//! The binary (`demeter-agent`) owns the network client, the main loop and the supervisor; this
//! library gives it a [`collectors::Sampler`] that turns one tick (`now_ms`) into one
//! [`demeter_common::metrics::Sample`].

pub mod collectors;
pub mod error;

pub use error::{Error, Result};

//! Shared by the Demeter agent and coordinator: the wire protocol, the sample types, configuration
//! loading and TLS helpers.
//!
//! Invariant: `protocol`, `codec` and `metrics` do no I/O; they turn bytes into messages and back.

pub mod codec;
pub mod config;
pub mod error;
pub mod metrics;
pub mod protocol;
pub mod service;
pub mod tls;
pub mod transport;
pub mod udp;

pub use error::{Error, Result};

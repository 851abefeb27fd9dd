//! Shared by the Demeter agent and coordinator: the wire protocol, the sample types, configuration
//! loading and TLS helpers.
//!
//! Invariant: the protocol codec does no I/O; it turns bytes into messages and back.

pub mod metrics;

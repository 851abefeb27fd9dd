//! The Demeter node agent as a library: collectors, the outbox of unsent samples, the
//! connection to the coordinator and order handling. `main.rs` is the thin binary around it.

pub mod backoff;
pub mod client;
pub mod orders;
pub mod outbox;

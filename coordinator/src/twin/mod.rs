//! The digital twin: a deterministic simulator of a Flink job in virtual time. `truth` is what
//! a configuration really does (TOML-configurable), `change` what a reconfiguration costs,
//! `job` the per-second dynamics of production, `profiling` the profiling copies, `sim` the
//! loop that feeds a policy, and `report` what a run amounts to.

pub mod change;
pub mod job;
pub mod profiling;
pub mod report;
pub mod second;
pub mod sim;
pub mod timeline;
pub mod truth;

#[cfg(test)]
pub mod testing;

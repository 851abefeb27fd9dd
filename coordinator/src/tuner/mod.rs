//! The live loop (design §4): for every job listed in the coordinator's `[tuning]` table,
//! observe production (Flink REST + agent samples → one `JobTick` per period), let the job's
//! policy decide, and carry its decisions out — reconfigurations through the executor service,
//! profiling batches through the profiler — recording every decision with its reason.
//!
//! [`core`] is sans-IO (wall-clock milliseconds are an argument) and tested with a scripted
//! policy; [`shell`] is the thin async driver; [`log`] the durable decision log;
//! [`settings`] the configuration.
//!
//! Invariant: the tuner changes production only through the executor service, so its
//! reconfigurations are journaled, savepoint-safe and exclusive with CLI applies, resumptions
//! and watchdog recoveries (one operation per job).

mod blocking;
pub mod board;
pub mod core;
pub mod log;
pub mod settings;
pub mod shell;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod core_tests;

pub use self::board::Board;
pub use self::core::{Command, LiveView, Reading, TunerCore};
pub use self::log::{DecisionEntry, DecisionLog};
pub use self::settings::{JobTuning, ProfilingSettings, TuningConfig};
pub use self::shell::Tuner;

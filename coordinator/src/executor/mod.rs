//! The executor: carries a job from one configuration to another without losing its state.
//!
//! - [`plan`] chooses the strategy (in place, restart, first deployment);
//! - [`machine`] is the sans-IO state machine with deadlines and rollback;
//! - [`journal`] persists every step in the store so a restarted coordinator resumes;
//! - [`driver`] executes the machine's effects against Flink's REST API and a
//!   [`taskmanagers::TaskManagers`] backend (agents over QUIC, or local processes);
//! - [`failure`] injects a TaskManager failure into a job and times its recovery;
//! - [`service`] is the daemon's executor: CLI requests over QUIC, agent-run TaskManagers,
//!   resume at start and the job watchdog.

pub mod driver;
pub mod effects;
pub mod failure;
pub mod journal;
pub mod machine;
pub mod operation;
pub mod plan;
pub mod service;
pub mod taskmanagers;

pub use effects::{Effect, Event, Fault};
pub use machine::{Limits, Machine};
pub use operation::{Deployment, Operation, Outcome, Phase, Step};
pub use plan::{ClusterFacts, Strategy};

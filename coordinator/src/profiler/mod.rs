//! Profiling copies on real Flink (design §4.4): per batch, one small separate Flink cluster
//! per candidate configuration — its own JobManager, ports, state, checkpoint, savepoint and
//! output directories, TaskManagers of the candidate's shape — fed the job's profiling
//! arguments at the ordered rate; warm-up, a measurement window, a TaskManager killed just
//! before a checkpoint to time the recovery, then torn down completely. The results are
//! [`Observation`](crate::models::observations::Observation)s for the models.
//!
//! - [`plan`] (pure): ports and directories, the argument template, the profiling cap;
//! - [`conf`] (pure): the copy's `config.yaml`;
//! - [`measure`] (pure): REST readings → one measurement, the moment to kill;
//! - [`machine`] (sans-IO): one copy's lifecycle with deadlines; always ends torn down;
//! - [`driver`]: the async shell of one copy (JobManager child process, TaskManagers through
//!   the executor's backend trait, the REST client); [`host`] where copies run: this host
//!   (TaskManagers as child processes, `/proc` usage) or, through [`agent_host`], the node
//!   agents with the most room ([`placement`], pure), usage from their samples;
//! - [`kept_logs`]: a failed copy's logs outlive its tear-down (the newest few);
//! - [`batch`]: plans a batch and runs its copies in parallel; [`batch::Recall`] is the flag
//!   production raises to take the resources back.

pub mod agent_host;
pub mod batch;
pub mod conf;
pub mod driver;
pub mod host;
pub mod kept_logs;
pub mod machine;
pub mod measure;
pub mod placement;
pub mod plan;

pub use machine::{CopyMachine, CopyOutcome, CopyReport, Effect, Event, Phase, Times};
pub use plan::{Admission, CopyPlan, Layout, PortRange, Resources, Surroundings};

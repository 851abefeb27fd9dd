//! Where a job's TaskManagers run: one trait, two backends.
//!
//! - [`AgentTaskManagers`] orders the node agents over QUIC (production; the agents run the
//!   processes under systemd or as children with cgroup CPU limits);
//! - [`LocalTaskManagers`] runs `taskmanager.sh start-foreground` on this host, for the CLI
//!   and tests without agents. Its processes outlive the coordinator (own process group) and
//!   are found again by their command line, so a restarted coordinator manages them.
//!
//! TaskManager ids are `<job>-tm<i>` and double as Flink's resource id, so REST and backend
//! agree on names (see [`super::plan::taskmanager_id`]).

mod agents;
mod local;

use std::future::Future;
use std::pin::Pin;

use demeter_common::protocol::TaskManagerSpec;

pub use agents::AgentTaskManagers;
pub(crate) use agents::{alive_on, live_ids, order};
pub use local::{LocalPaths, LocalTaskManagers};

use crate::Result;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub trait TaskManagers: Send + Sync + std::fmt::Debug {
    /// Makes exactly `specs` run among the job's TaskManagers: starts missing ones, restarts
    /// those whose spec differs, stops the job's others. Idempotent. Returns once the
    /// processes are started (Flink registration is watched over REST).
    fn ensure<'a>(
        &'a self,
        job: &'a str,
        specs: &'a [TaskManagerSpec],
    ) -> BoxFuture<'a, Result<()>>;

    /// Ids of the job's TaskManagers whose processes are alive.
    fn alive<'a>(&'a self, job: &'a str) -> BoxFuture<'a, Result<Vec<String>>>;

    /// SIGKILL one TaskManager (failure injection).
    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// The id prefix of a job's TaskManagers.
pub(crate) fn prefix(job: &str) -> String {
    format!("{job}-tm")
}

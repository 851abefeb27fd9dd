//! TaskManagers run by the node agents, ordered over QUIC through the ingest server.
//! TaskManager `i` of a job goes to agent `i mod n` of the configured agents (or, if none are
//! configured, of the connected ones in name order).

use std::time::Duration;

use demeter_common::protocol::{
    OrderKind, OrderOutcome, TaskManagerSpec, TaskManagerState, TaskManagerStatus,
};

use super::{BoxFuture, TaskManagers, prefix};
use crate::ingest::IngestHandle;
use crate::{Error, Result};

#[derive(Debug, Clone)]
pub struct AgentTaskManagers {
    ingest: IngestHandle,
    agents: Vec<String>,
    order_timeout: Duration,
}

impl AgentTaskManagers {
    pub fn new(ingest: IngestHandle, agents: Vec<String>) -> Self {
        Self {
            ingest,
            agents,
            order_timeout: Duration::from_secs(90),
        }
    }

    fn placement(&self) -> Result<Vec<String>> {
        let mut agents = if self.agents.is_empty() {
            self.ingest.connected_agents()
        } else {
            self.agents.clone()
        };
        agents.sort();
        if agents.is_empty() {
            return Err(Error::Executor(
                "no agent connected to run TaskManagers".into(),
            ));
        }
        Ok(agents)
    }

    async fn order(&self, agent: &str, kind: OrderKind) -> Result<Vec<TaskManagerStatus>> {
        order(&self.ingest, agent, kind, self.order_timeout).await
    }
}

/// Ids of the TaskManagers in `list` whose id starts with `prefix` and whose process is alive
/// (running or starting).
pub(crate) fn live_ids(list: Vec<TaskManagerStatus>, prefix: &str) -> Vec<String> {
    list.into_iter()
        .filter(|s| {
            s.spec.id.starts_with(prefix)
                && matches!(
                    s.state,
                    TaskManagerState::Running | TaskManagerState::Starting
                )
        })
        .map(|s| s.spec.id)
        .collect()
}

/// The job's live TaskManagers on `agents`.
pub(crate) async fn alive_on(
    ingest: &IngestHandle,
    agents: impl IntoIterator<Item = String>,
    job: &str,
    timeout: Duration,
) -> Result<Vec<String>> {
    let mine = prefix(job);
    let mut alive = Vec::new();
    for agent in agents {
        let list = order(ingest, &agent, OrderKind::ListTaskManagers, timeout).await?;
        alive.extend(live_ids(list, &mine));
    }
    Ok(alive)
}

/// Sends one TaskManager order to `agent` and returns the TaskManagers it reports afterwards
/// (empty for a plain `Done`); any other outcome is an error.
pub(crate) async fn order(
    ingest: &IngestHandle,
    agent: &str,
    kind: OrderKind,
    timeout: Duration,
) -> Result<Vec<TaskManagerStatus>> {
    let what = format!("{kind:?}");
    let result = ingest.send_order(agent, kind, timeout).await?;
    match result.outcome {
        OrderOutcome::TaskManagers(list) => Ok(list),
        OrderOutcome::Done => Ok(Vec::new()),
        other => Err(Error::Executor(format!(
            "agent {agent} answered {what} with {other:?}"
        ))),
    }
}

impl TaskManagers for AgentTaskManagers {
    fn ensure<'a>(
        &'a self,
        job: &'a str,
        specs: &'a [TaskManagerSpec],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let agents = self.placement()?;
            let mine = prefix(job);
            for (n, agent) in agents.iter().enumerate() {
                let wanted: Vec<&TaskManagerSpec> = specs
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % agents.len() == n)
                    .map(|(_, s)| s)
                    .collect();
                for status in self.order(agent, OrderKind::ListTaskManagers).await? {
                    let id = &status.spec.id;
                    if id.starts_with(&mine) && !wanted.iter().any(|s| &s.id == id) {
                        self.order(agent, OrderKind::StopTaskManager { id: id.clone() })
                            .await?;
                    }
                }
                for spec in wanted {
                    // The agent restarts a TaskManager whose spec changed, keeps an equal one.
                    self.order(agent, OrderKind::StartTaskManager(spec.clone()))
                        .await?;
                }
            }
            Ok(())
        })
    }

    fn alive<'a>(&'a self, job: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(
            async move { alive_on(&self.ingest, self.placement()?, job, self.order_timeout).await },
        )
    }

    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            for agent in self.placement()? {
                let list = self.order(&agent, OrderKind::ListTaskManagers).await?;
                if list.iter().any(|s| s.spec.id == id) {
                    self.order(&agent, OrderKind::KillTaskManager { id: id.to_string() })
                        .await?;
                    return Ok(());
                }
            }
            Err(Error::Executor(format!("no agent runs TaskManager {id}")))
        })
    }
}

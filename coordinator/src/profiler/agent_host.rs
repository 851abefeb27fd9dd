//! Copies whose TaskManagers the node agents run: the copy's JobManager stays on this host
//! ([`super::host::spawn_jobmanager`]), its TaskManagers are `StartTaskManager` orders to the
//! agents with the most room per their newest samples ([`super::placement`]), joining the
//! copy's JobManager through dynamic properties (its address and RPC port, its own temporary
//! directories) on top of the conf dir the agent has for `cluster` — no copy-specific
//! configuration has to exist on the agents' nodes. What they use comes from the agents' JVM
//! samples; failure injection is the `KillTaskManager` order.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use demeter_common::protocol::{OrderKind, TaskManagerSpec, TaskManagerStatus};

use super::host::CopyHost;
use super::placement::{self, Booking};
use super::plan::{CopyPlan, Resources};
use crate::executor::driver::now_ms;
use crate::executor::taskmanagers::{BoxFuture, TaskManagers, alive_on, live_ids, order, prefix};
use crate::ingest::IngestHandle;
use crate::{Error, Result};

/// Agents whose newest sample is older than this are not given copies (samples come every
/// second or so; a silent agent may be gone).
const MAX_SAMPLE_AGE_MS: u64 = 15_000;

#[derive(Debug)]
pub struct AgentHost {
    ingest: IngestHandle,
    /// The agents' cluster name whose `FLINK_HOME` and conf dir copy TaskManagers start from.
    cluster: String,
    /// Agents that may run copies; empty = every connected one.
    agents: Vec<String>,
    /// Kept free on every node for production and everything else.
    reserve: Resources,
    /// Whether idle CPU limits placement (else memory only).
    count_cpu: bool,
    order_timeout: Duration,
    /// Copy TaskManagers booked on the agents, by copy.
    booked: Mutex<HashMap<String, Vec<Booking>>>,
    backends: Mutex<HashMap<String, Arc<CopyTaskManagers>>>,
}

impl AgentHost {
    pub fn new(
        ingest: IngestHandle,
        cluster: String,
        agents: Vec<String>,
        reserve: Resources,
        count_cpu: bool,
    ) -> Self {
        Self {
            ingest,
            cluster,
            agents,
            reserve,
            count_cpu,
            order_timeout: Duration::from_secs(90),
            booked: Mutex::new(HashMap::new()),
            backends: Mutex::new(HashMap::new()),
        }
    }

    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// Whether any allowed agent is connected with a recent sample (the tuner's choice of
    /// host when profiling may use agents).
    pub fn usable(&self) -> bool {
        !self.spare().is_empty()
    }

    fn all_bookings(&self) -> Vec<Booking> {
        self.booked
            .lock()
            .map(|m| m.values().flatten().cloned().collect())
            .unwrap_or_default()
    }

    fn spare(&self) -> BTreeMap<String, Resources> {
        placement::spare_by_agent(
            &self.ingest.latest_samples(),
            &self.agents,
            self.reserve,
            &self.all_bookings(),
            now_ms(),
            MAX_SAMPLE_AGE_MS,
        )
    }

    /// Places the copy's TaskManagers and books them (under the lock, so copies of one batch
    /// placed at once see each other's bookings).
    fn place(&self, plan: &CopyPlan) -> std::result::Result<BTreeMap<String, String>, String> {
        let mut booked = self
            .booked
            .lock()
            .map_err(|_| "the booking table is poisoned".to_string())?;
        let all: Vec<Booking> = booked.values().flatten().cloned().collect();
        let spare = placement::spare_by_agent(
            &self.ingest.latest_samples(),
            &self.agents,
            self.reserve,
            &all,
            now_ms(),
            MAX_SAMPLE_AGE_MS,
        );
        let placed = placement::place(&spare, &plan.taskmanagers, self.count_cpu)?;
        booked.insert(
            plan.name.clone(),
            plan.taskmanagers
                .iter()
                .filter_map(|tm| {
                    placed.get(&tm.id).map(|agent| Booking {
                        agent: agent.clone(),
                        taskmanager: tm.id.clone(),
                        demand: placement::demand(tm),
                    })
                })
                .collect(),
        );
        Ok(placed)
    }

    fn backend(&self, plan: &CopyPlan) -> Arc<CopyTaskManagers> {
        let make = || {
            let placed = self.place(plan);
            match &placed {
                Ok(map) => tracing::info!(copy = %plan.name, placement = ?map,
                    "profiling TaskManagers placed on agents"),
                Err(reason) => tracing::warn!(copy = %plan.name, reason,
                    "no agent has room for the profiling TaskManagers"),
            }
            Arc::new(CopyTaskManagers {
                ingest: self.ingest.clone(),
                placed,
                cluster: self.cluster.clone(),
                properties: placement::copy_properties(plan),
                order_timeout: self.order_timeout,
            })
        };
        match self.backends.lock() {
            Ok(mut map) => map.entry(plan.name.clone()).or_insert_with(make).clone(),
            Err(_) => make(),
        }
    }
}

impl CopyHost for AgentHost {
    fn taskmanagers(&self, plan: &CopyPlan) -> Arc<dyn TaskManagers> {
        self.backend(plan)
    }

    fn usage(&self, plan: &CopyPlan) -> Option<Resources> {
        let mine = prefix(&plan.name);
        placement::jvm_usage(self.ingest.latest_jvms(&mine).iter(), |id| {
            id.starts_with(&mine)
        })
    }

    fn available(&self) -> Option<Resources> {
        let mut total = placement::total(&self.spare());
        if !self.count_cpu {
            total.cpu_cores = f64::INFINITY;
        }
        Some(total)
    }

    fn jobmanagers_elsewhere(&self) -> bool {
        true
    }

    fn release(&self, plan: &CopyPlan) {
        if let Ok(mut map) = self.booked.lock() {
            map.remove(&plan.name);
        }
        if let Ok(mut map) = self.backends.lock() {
            map.remove(&plan.name);
        }
    }

    fn pressed(&self) -> Option<String> {
        let nodes = placement::pressed(
            &self.ingest.latest_samples(),
            self.reserve.memory_mb,
            &self.all_bookings(),
        );
        (!nodes.is_empty()).then(|| {
            format!(
                "production needs the memory (free memory below the reserve on {})",
                nodes.join(", ")
            )
        })
    }
}

/// One copy's TaskManagers on the agents it was placed on.
#[derive(Debug)]
struct CopyTaskManagers {
    ingest: IngestHandle,
    /// TaskManager id → agent, or why the copy fits on no agent.
    placed: std::result::Result<BTreeMap<String, String>, String>,
    cluster: String,
    properties: Vec<(String, String)>,
    order_timeout: Duration,
}

impl CopyTaskManagers {
    fn placed(&self) -> Result<&BTreeMap<String, String>> {
        self.placed
            .as_ref()
            .map_err(|reason| Error::Executor(format!("profiling copy not placed: {reason}")))
    }

    fn agents(&self) -> Result<BTreeSet<String>> {
        Ok(self.placed()?.values().cloned().collect())
    }

    /// The spec the agent gets: its own cluster's paths, the copy's properties after the
    /// spec's own.
    fn for_agent(&self, spec: &TaskManagerSpec) -> TaskManagerSpec {
        let mut spec = spec.clone();
        spec.cluster.clone_from(&self.cluster);
        spec.properties.extend(self.properties.iter().cloned());
        spec
    }

    async fn order(&self, agent: &str, kind: OrderKind) -> Result<Vec<TaskManagerStatus>> {
        order(&self.ingest, agent, kind, self.order_timeout).await
    }
}

impl TaskManagers for CopyTaskManagers {
    fn ensure<'a>(
        &'a self,
        job: &'a str,
        specs: &'a [TaskManagerSpec],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let placed = self.placed()?;
            for spec in specs {
                if !placed.contains_key(&spec.id) {
                    return Err(Error::Executor(format!(
                        "TaskManager {} was not placed on any agent",
                        spec.id
                    )));
                }
            }
            let mine = prefix(job);
            for agent in self.agents()? {
                let wanted: Vec<&TaskManagerSpec> = specs
                    .iter()
                    .filter(|s| placed.get(&s.id) == Some(&agent))
                    .collect();
                let live = live_ids(
                    self.order(&agent, OrderKind::ListTaskManagers).await?,
                    &mine,
                );
                for id in live
                    .into_iter()
                    .filter(|id| !wanted.iter().any(|s| &s.id == id))
                {
                    self.order(&agent, OrderKind::StopTaskManager { id })
                        .await?;
                }
                for spec in wanted {
                    self.order(&agent, OrderKind::StartTaskManager(self.for_agent(spec)))
                        .await?;
                }
            }
            Ok(())
        })
    }

    fn alive<'a>(&'a self, job: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(async move {
            // A copy placed nowhere never started a TaskManager.
            if self.placed.is_err() {
                return Ok(Vec::new());
            }
            alive_on(&self.ingest, self.agents()?, job, self.order_timeout).await
        })
    }

    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let agent = self
                .placed()?
                .get(id)
                .ok_or_else(|| Error::Executor(format!("no agent runs TaskManager {id}")))?;
            tracing::info!(id, agent, "SIGKILL profiling TaskManager through its agent");
            self.order(agent, OrderKind::KillTaskManager { id: id.to_string() })
                .await
                .map(|_| ())
        })
    }
}

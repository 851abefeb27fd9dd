//! The async shell around the [`Machine`]: journals, executes effects against Flink's REST
//! API and a TaskManager backend, feeds the answers back with the wall clock. Holds no
//! decisions: every "what next" is the machine's.

mod execute;

pub(crate) use execute::not_found;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::effects::Effect;
use super::journal::{JobRecord, Journal};
use super::machine::{Limits, Machine};
use super::operation::{Operation, Step};
use super::plan::{self, ClusterFacts};
use super::taskmanagers::TaskManagers;
use crate::flink::{FlinkClient, JarId, JobState};
use crate::models::space::JobConfig;
use crate::{Error, Result};

/// Watches an operation as it runs (progress output, failpoints in the binary).
pub trait Observer: Send + Sync {
    /// After a record is durably journaled; `finished` is the step it closes.
    fn journaled(&self, _op: &Operation, _finished: Option<Step>) {}
    /// After an effect was carried out, before the machine hears its answer.
    fn effect_done(&self, _op: &Operation, _effect: &Effect) {}
    fn alert(&self, _op: &Operation, _message: &str) {}
}

/// An observer that does nothing.
#[derive(Debug)]
pub struct Quiet;
impl Observer for Quiet {}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub struct Driver {
    pub client: Arc<FlinkClient>,
    pub taskmanagers: Arc<dyn TaskManagers>,
    pub journal: Journal,
    pub limits: Limits,
    /// The cluster name TaskManager specs carry (what agents map to a Flink home).
    pub cluster: String,
    pub observer: Arc<dyn Observer>,
    jar_ids: Mutex<HashMap<PathBuf, JarId>>,
    /// The last operation id handed out: ids stay unique when two start in one millisecond.
    last_id: AtomicU64,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl Driver {
    pub fn new(
        client: Arc<FlinkClient>,
        taskmanagers: Arc<dyn TaskManagers>,
        journal: Journal,
        cluster: &str,
    ) -> Self {
        Self {
            client,
            taskmanagers,
            journal,
            limits: Limits::default(),
            cluster: cluster.to_string(),
            observer: Arc::new(Quiet),
            jar_ids: Mutex::new(HashMap::new()),
            last_id: AtomicU64::new(0),
        }
    }

    /// Unique across runs and stores (submitted job ids derive from it): the clock in ms, the
    /// process id's last three digits, and never the same twice in one process.
    fn next_id(&self, now: u64) -> u64 {
        let candidate = now * 1000 + u64::from(std::process::id() % 1000);
        let next = |last: u64| candidate.max(last + 1);
        match self
            .last_id
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(next(last))
            }) {
            Ok(last) | Err(last) => next(last),
        }
    }

    /// Plans and carries out `job` → `to`. Refuses while another operation of the job is in
    /// flight (resume that first).
    pub async fn apply(&self, name: &str, to: JobConfig) -> Result<Operation> {
        let job = self
            .journal
            .job(name)?
            .ok_or_else(|| Error::Executor(format!("no registered job {name}")))?;
        if job.current.as_ref().is_some_and(|d| d.config == to) {
            return Err(Error::Executor(format!("{name} already runs {to}")));
        }
        let facts = match &job.current {
            Some(current) => {
                let details = self.client.job_details(&current.job_id).await?;
                ClusterFacts {
                    adaptive_scheduler: details.scheduler_type.as_deref() == Some("Adaptive"),
                    free_slots: self.client.overview().await?.slots_available,
                }
            }
            None => ClusterFacts {
                adaptive_scheduler: false,
                free_slots: 0,
            },
        };
        let strategy = plan::choose(job.current.as_ref().map(|d| &d.config), &to, facts);
        let now = now_ms();
        let id = self.next_id(now);
        let machine = Machine::start(
            id,
            name,
            &self.cluster,
            strategy,
            job.current.clone(),
            to,
            now,
            self.limits.clone(),
        );
        self.journal.begin(machine.operation())?;
        tracing::info!(job = name, op = id, ?strategy, %to, "reconfiguration started");
        self.run(&job, machine).await
    }

    /// Resumes (or rolls back) every operation a previous coordinator left in flight.
    pub async fn resume_all(&self) -> Result<Vec<Operation>> {
        let mut done = Vec::new();
        for op in self.journal.in_flight()? {
            done.push(self.resume(op).await?);
        }
        Ok(done)
    }

    /// Resumes (or rolls back) one operation a previous coordinator left in flight.
    pub async fn resume(&self, op: Operation) -> Result<Operation> {
        let job = self.journal.job(&op.job)?.ok_or_else(|| {
            Error::Executor(format!("operation {} names unknown job {}", op.id, op.job))
        })?;
        tracing::info!(job = %op.job, op = op.id, step = op.step.name(), "resuming operation");
        let machine = Machine::resume(op, &self.cluster, now_ms(), self.limits.clone());
        self.run(&job, machine).await
    }

    /// Brings a job that stopped running outside any operation back in its current
    /// configuration from its newest completed snapshot (the watchdog's order).
    pub async fn recover(&self, name: &str, reason: &str) -> Result<Operation> {
        let job = self
            .journal
            .job(name)?
            .ok_or_else(|| Error::Executor(format!("no registered job {name}")))?;
        let current = job
            .current
            .clone()
            .ok_or_else(|| Error::Executor(format!("{name} was never deployed")))?;
        let now = now_ms();
        let machine = Machine::recover(
            self.next_id(now),
            name,
            &self.cluster,
            current,
            reason,
            now,
            self.limits.clone(),
        );
        self.journal.begin(machine.operation())?;
        tracing::error!(job = name, op = machine.operation().id, %reason, "ALERT: recovering a stopped job");
        self.run(&job, machine).await
    }

    /// Drives the machine to its end. A journal write failure stops here, before the next
    /// effect: the operation then stays in flight at its last durable step.
    pub async fn run(&self, job: &JobRecord, mut machine: Machine) -> Result<Operation> {
        loop {
            while let Some(effect) = machine.poll_effect() {
                match &effect {
                    Effect::Journal { op, finished } => {
                        self.journal.record(op)?;
                        self.observer.journaled(op, *finished);
                    }
                    Effect::Alert { message } => {
                        tracing::error!(job = %job.name, %message, "executor alert");
                        self.observer.alert(machine.operation(), message);
                    }
                    _ => {
                        let event = self.execute(job, &effect).await;
                        self.observer.effect_done(machine.operation(), &effect);
                        machine.handle_event(now_ms(), event);
                    }
                }
            }
            if machine.is_finished() {
                return Ok(machine.operation().clone());
            }
            let Some(at) = machine.poll_timeout() else {
                return Err(Error::Executor("the state machine stalled".into()));
            };
            let wait = at.saturating_sub(now_ms());
            tokio::time::sleep(Duration::from_millis(wait)).await;
            machine.handle_timeout(now_ms());
        }
    }

    /// The job the registration says runs now, and whether Flink agrees.
    pub async fn current_state(&self, job: &JobRecord) -> Option<JobState> {
        let current = job.current.as_ref()?;
        self.client
            .job_details(&current.job_id)
            .await
            .ok()
            .map(|d| d.state)
    }
}

//! The async shell around the [`Machine`]: journals, executes effects against Flink's REST
//! API and a TaskManager backend, feeds the answers back with the wall clock. Holds no
//! decisions: every "what next" is the machine's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::effects::{
    Effect, Event, Fault, JobView, RegisteredTm, SavepointProgress, StopView, TaskManagersView,
};
use super::journal::{JobRecord, Journal};
use super::machine::{Limits, Machine};
use super::operation::{Operation, Step};
use super::plan::{self, ClusterFacts};
use super::taskmanagers::TaskManagers;
use crate::flink::{
    FlinkClient, JarId, JarRunRequest, JobId, JobState, ParallelismBounds, SavepointFormat,
    SavepointStatus, StopRequest,
};
use crate::models::space::JobConfig;
use crate::{Error, FlinkErrorKind, Result};

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
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

fn fault(e: Error) -> Fault {
    Fault::new(e.to_string())
}

fn not_found(e: &Error) -> bool {
    matches!(
        e,
        Error::Flink {
            kind: FlinkErrorKind::JobNotFound { .. },
            ..
        }
    )
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
        // Unique across runs and stores: submitted job ids derive from it.
        let id = now * 1000 + u64::from(std::process::id() % 1000);
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
            let job = self.journal.job(&op.job)?.ok_or_else(|| {
                Error::Executor(format!("operation {} names unknown job {}", op.id, op.job))
            })?;
            tracing::info!(job = %op.job, op = op.id, step = op.step.name(), "resuming operation");
            let machine = Machine::resume(op, &self.cluster, now_ms(), self.limits.clone());
            done.push(self.run(&job, machine).await?);
        }
        Ok(done)
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

    async fn execute(&self, job: &JobRecord, effect: &Effect) -> Event {
        let c = &self.client;
        match effect {
            Effect::TriggerStop { job: id } => {
                let request = StopRequest {
                    target_directory: job.savepoint_dir.clone(),
                    drain: false,
                    format: Some(SavepointFormat::Canonical),
                };
                Event::StopTriggered(c.stop_with_savepoint(id, &request).await.map_err(fault))
            }
            Effect::PollSavepoint { job: id, trigger } => {
                Event::Savepoint(match c.savepoint_status(id, trigger).await {
                    Ok(SavepointStatus::InProgress) => Ok(SavepointProgress::InProgress),
                    Ok(SavepointStatus::Completed { location }) => {
                        Ok(SavepointProgress::Completed { location })
                    }
                    Ok(SavepointStatus::Failed(f)) => Ok(SavepointProgress::Failed {
                        message: format!("{}: {}", f.message, f.root_cause),
                    }),
                    Err(e) => Err(fault(e)),
                })
            }
            Effect::InspectStop { job: id, since_ms } => {
                Event::StopInspected(self.inspect_stop(id, *since_ms).await.map_err(fault))
            }
            Effect::EnsureTaskManagers { job: name, specs } => Event::TaskManagersEnsured(
                self.taskmanagers.ensure(name, specs).await.map_err(fault),
            ),
            Effect::QueryTaskManagers { job: name, ids } => {
                Event::TaskManagers(self.query_taskmanagers(name, ids).await.map_err(fault))
            }
            Effect::Submit {
                job_id,
                config,
                restore,
            } => Event::Submitted(
                self.submit(job, job_id, config, restore.clone())
                    .await
                    .map_err(fault),
            ),
            Effect::QueryJob { job: id } => Event::Job(match c.job_details(id).await {
                Ok(d) => {
                    let sources = d.source_vertices();
                    let records: Vec<f64> = sources
                        .iter()
                        .filter_map(|v| v.metrics.as_ref().and_then(|m| m.write_records))
                        .collect();
                    Ok(Some(JobView {
                        state: d.state,
                        all_running: d.is_fully_running(),
                        vertices: d
                            .vertices
                            .iter()
                            .map(|v| (v.parallelism, v.max_parallelism))
                            .collect(),
                        source_records: (!records.is_empty()).then(|| records.iter().sum()),
                    }))
                }
                Err(e) if not_found(&e) => Ok(None),
                Err(e) => Err(fault(e)),
            }),
            Effect::Rescale {
                job: id,
                parallelism,
            } => Event::Rescaled(self.rescale(id, *parallelism).await.map_err(fault)),
            Effect::Cancel { job: id } => Event::Cancelled(c.cancel_job(id).await.map_err(fault)),
            Effect::ReadRestorePoint { job: id } => {
                Event::RestorePoint(match c.checkpoint_stats(id).await {
                    Ok(stats) => {
                        let newest = [stats.latest.completed, stats.latest.savepoint]
                            .into_iter()
                            .flatten()
                            .filter(|e| e.status == "COMPLETED" && e.external_path.is_some())
                            .max_by_key(|e| e.id);
                        Ok(newest.and_then(|e| e.external_path))
                    }
                    Err(e) if not_found(&e) => Ok(None),
                    Err(e) => Err(fault(e)),
                })
            }
            Effect::Journal { .. } | Effect::Alert { .. } => {
                Event::Submitted(Err(Fault::new("not an action")))
            }
        }
    }

    async fn inspect_stop(&self, id: &JobId, since_ms: u64) -> Result<StopView> {
        let state = match self.client.job_details(id).await {
            Ok(d) => d.state,
            Err(e) if not_found(&e) => {
                return Ok(StopView {
                    state: None,
                    savepoint: None,
                    snapshot_in_progress: false,
                });
            }
            Err(e) => return Err(e),
        };
        let stats = self.client.checkpoint_stats(id).await?;
        let savepoint = stats
            .latest
            .savepoint
            .filter(|s| s.status == "COMPLETED" && s.trigger_timestamp >= since_ms as i64)
            .and_then(|s| s.external_path);
        Ok(StopView {
            state: Some(state),
            savepoint,
            snapshot_in_progress: stats.counts.in_progress > 0,
        })
    }

    async fn query_taskmanagers(&self, name: &str, ids: &[String]) -> Result<TaskManagersView> {
        let registered = self
            .client
            .taskmanagers()
            .await?
            .into_iter()
            .map(|t| RegisteredTm {
                id: t.id.0,
                slots: t.slots_number,
                memory_mb: t
                    .memory_configuration
                    .map_or(0, |m| (m.total_process_memory >> 20) as u32),
            })
            .collect();
        let alive = self.taskmanagers.alive(name).await?;
        let dead = ids
            .iter()
            .filter(|id| !alive.contains(id))
            .cloned()
            .collect();
        Ok(TaskManagersView { registered, dead })
    }

    async fn submit(
        &self,
        job: &JobRecord,
        job_id: &JobId,
        config: &JobConfig,
        restore: Option<String>,
    ) -> Result<()> {
        let cached = self
            .jar_ids
            .lock()
            .ok()
            .and_then(|m| m.get(&job.jar).cloned());
        let jar = match cached {
            Some(jar) => jar,
            None => {
                let jar = self.client.upload_jar(&job.jar).await?;
                if let Ok(mut m) = self.jar_ids.lock() {
                    m.insert(job.jar.clone(), jar.clone());
                }
                jar
            }
        };
        let request = JarRunRequest {
            entry_class: Some(job.entry_class.clone()),
            program_args_list: job.args.clone(),
            parallelism: Some(config.parallelism),
            savepoint_path: restore,
            allow_non_restored_state: Some(false),
            flink_configuration: plan::flink_configuration(config),
            job_id: Some(job_id.clone()),
        };
        let result = self.client.run_jar(&jar, &request).await;
        if result.is_err() {
            // The jar may be gone (a restarted JobManager): upload again next time.
            if let Ok(mut m) = self.jar_ids.lock() {
                m.remove(&job.jar);
            }
        }
        result.map(|_| ())
    }

    async fn rescale(&self, id: &JobId, parallelism: u32) -> Result<()> {
        let mut requirements = self.client.resource_requirements(id).await?;
        for requirement in requirements.values_mut() {
            requirement.parallelism = ParallelismBounds {
                lower_bound: 1,
                upper_bound: parallelism,
            };
        }
        self.client
            .set_resource_requirements(id, &requirements)
            .await
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

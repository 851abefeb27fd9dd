//! The daemon's executor: CLI job requests in (through the ingest server's CLI sessions),
//! operations carried out by the [`Driver`] with TaskManagers run by the agents, progress
//! streamed back. At start it resumes what a previous daemon left in flight once the
//! configured agents have reconnected, then watches every registered job (the watchdog).
//!
//! The decisions live in pure modules: [`admission`] (one operation per job, what may be
//! applied), [`watchdog`] (when a stopped job is recovered), [`wire`] (what the CLI sees).

pub mod admission;
mod hub;
pub mod watchdog;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use demeter_common::protocol::jobs::{JobApply, JobRegistration, OperationEnd};
use demeter_common::protocol::{JobReply, JobRequest};
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use self::admission::{Busy, Desk};
use self::hub::Hub;
use self::watchdog::{Seen, Verdict, Watch};
use super::driver::{Driver, Observer, not_found, now_ms};
use super::journal::{JobRecord, Journal};
use super::operation::Operation;
use super::taskmanagers::AgentTaskManagers;
use crate::config::WatchdogConfig;
use crate::flink::{FlinkClient, JobState};
use crate::ingest::{IngestHandle, JobService};
use crate::models::space::SearchSpace;
use crate::{Error, Result};

/// What the daemon's executor needs from its configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Cluster name in TaskManager specs (the agents map it to a Flink home).
    pub cluster: String,
    /// Agents that run TaskManagers; empty = every connected agent.
    pub agents: Vec<String>,
    /// How long to wait at start for `agents` before resuming without them.
    pub resume_wait: Duration,
    pub watchdog: WatchdogConfig,
}

/// Answers `job tuning` requests (the live loops' board); the executor only routes them.
pub trait TuningViews: Send + Sync + std::fmt::Debug {
    fn view(
        &self,
        job: &str,
        last: u32,
    ) -> std::result::Result<demeter_common::protocol::tuning::TuningView, String>;
}

pub struct ExecutorService {
    tuning: std::sync::OnceLock<Arc<dyn TuningViews>>,
    driver: Arc<Driver>,
    hub: Arc<Hub>,
    journal: Journal,
    ingest: IngestHandle,
    desk: Mutex<Desk>,
    settings: Settings,
}

impl std::fmt::Debug for ExecutorService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorService")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ExecutorService {
    /// Starts answering CLI job requests on `ingest`, resumes the operations left in flight
    /// (their jobs are busy until then) and starts the watchdog. `observer` sees every step
    /// after the CLI does (the binary's failpoints).
    pub fn start(
        ingest: IngestHandle,
        client: Arc<FlinkClient>,
        journal: Journal,
        settings: Settings,
        observer: Arc<dyn Observer>,
    ) -> Result<Arc<Self>> {
        let hub = Arc::new(Hub::new(observer));
        let backend = Arc::new(AgentTaskManagers::new(
            ingest.clone(),
            settings.agents.clone(),
        ));
        let mut driver = Driver::new(client, backend, journal.clone(), &settings.cluster);
        driver.observer = hub.clone();
        let in_flight = journal.in_flight()?;
        let mut desk = Desk::default();
        for op in &in_flight {
            let _ = desk.try_take(&op.job, Busy::Resume { op: op.id }, now_ms());
        }
        let service = Arc::new(Self {
            tuning: std::sync::OnceLock::new(),
            driver: Arc::new(driver),
            hub,
            journal,
            ingest: ingest.clone(),
            desk: Mutex::new(desk),
            settings,
        });
        if !ingest.serve_jobs(service.clone()) {
            return Err(Error::Executor(
                "an executor already serves job requests".into(),
            ));
        }
        tokio::spawn(service.clone().background(in_flight));
        Ok(service)
    }

    fn take(&self, job: &str, what: Busy) -> std::result::Result<(), String> {
        self.desk
            .lock()
            .map_err(|_| "executor state poisoned".to_string())?
            .try_take(job, what, now_ms())
    }

    fn release(&self, job: &str) {
        if let Ok(mut desk) = self.desk.lock() {
            desk.release(job);
        }
    }

    fn is_busy(&self, job: &str) -> bool {
        self.desk.lock().map_or(true, |d| d.is_busy(job))
    }

    fn missing_agents(&self) -> Vec<String> {
        admission::missing_agents(&self.settings.agents, &self.ingest.connected_agents())
    }

    async fn background(self: Arc<Self>, in_flight: Vec<Operation>) {
        self.wait_for_agents().await;
        for op in in_flight {
            let service = self.clone();
            tokio::spawn(async move {
                let (job, id) = (op.job.clone(), op.id);
                match service.driver.resume(op).await {
                    Ok(op) => {
                        info!(job, op = id, outcome = ?op.outcome(), "resumed operation finished")
                    }
                    Err(e) => {
                        error!(job, op = id, error = %e, "ALERT: resuming failed; the operation stays in flight until the next start")
                    }
                }
                service.release(&job);
            });
        }
        if self.settings.watchdog.enabled {
            self.watchdog().await;
        }
    }

    /// Agents reconnect after a coordinator restart; operations resume once those that run
    /// TaskManagers are back, or after `resume_wait` without them.
    async fn wait_for_agents(&self) {
        let started = Instant::now();
        let mut last_log = None::<Instant>;
        loop {
            let missing = self.missing_agents();
            if missing.is_empty() {
                info!(
                    waited_ms = started.elapsed().as_millis() as u64,
                    "agents connected"
                );
                return;
            }
            if started.elapsed() >= self.settings.resume_wait {
                warn!(?missing, "agents still missing; resuming without them");
                return;
            }
            if last_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
                info!(
                    ?missing,
                    waited_s = started.elapsed().as_secs(),
                    "waiting for agents to reconnect"
                );
                last_log = Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn seen(&self, job: &JobRecord) -> Seen {
        let Some(current) = &job.current else {
            return Seen::NotDeployed;
        };
        if self.is_busy(&job.name) {
            return Seen::InFlight;
        }
        match self.driver.client.job_details(&current.job_id).await {
            Ok(d) => Seen::Flink(Some(d.state)),
            Err(e) if not_found(&e) => Seen::Flink(None),
            Err(_) => Seen::Unreachable,
        }
    }

    async fn watchdog(self: Arc<Self>) {
        let config = self.settings.watchdog.clone();
        let grace_ms = config.grace_secs * 1000;
        info!(grace_s = config.grace_secs, "job watchdog started");
        let mut watches: HashMap<String, Watch> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_secs(config.interval_secs.max(1)));
        loop {
            tick.tick().await;
            let jobs = match self.journal.jobs() {
                Ok(jobs) => jobs,
                Err(e) => {
                    error!(error = %e, "watchdog cannot read the registered jobs");
                    continue;
                }
            };
            for job in jobs {
                let seen = self.seen(&job).await;
                let watch = watches.get(&job.name).copied().unwrap_or_default();
                let (verdict, next) = watchdog::decide(seen, watch, now_ms(), grace_ms);
                watches.insert(job.name.clone(), next);
                match verdict {
                    Verdict::Down { first: true, .. } => warn!(
                        job = %job.name, ?seen, grace_s = config.grace_secs,
                        "job is not running; recovering it after the grace period"
                    ),
                    Verdict::Recover { for_ms, attempt } => {
                        self.clone().recover(&job.name, seen, for_ms, attempt)
                    }
                    _ => {}
                }
            }
        }
    }

    fn recover(self: Arc<Self>, name: &str, seen: Seen, for_ms: u64, attempt: u32) {
        if self.take(name, Busy::Recover).is_err() {
            return;
        }
        let reason = format!(
            "watchdog: job was {} outside any operation for {} s (recovery {attempt})",
            match seen {
                Seen::Flink(Some(state)) => format!("{state:?}").to_uppercase(),
                _ => "unknown to Flink".into(),
            },
            for_ms / 1000
        );
        error!(job = name, %reason, "ALERT: restarting a stopped job from its newest snapshot");
        let name = name.to_string();
        tokio::spawn(async move {
            match self.driver.recover(&name, &reason).await {
                Ok(op) => info!(job = name, outcome = ?op.outcome(), "watchdog recovery finished"),
                Err(e) => error!(job = name, error = %e, "ALERT: watchdog recovery failed"),
            }
            self.release(&name);
        });
    }

    /// Carries out a reconfiguration a tuning policy ordered, under the same one-operation-per-job
    /// rule as a CLI apply. `Err` with the reason when the job is busy or agents are missing
    /// (nothing was changed).
    pub async fn apply_for_tuner(
        &self,
        name: &str,
        to: crate::models::space::JobConfig,
    ) -> std::result::Result<Operation, String> {
        let missing = self.missing_agents();
        if !missing.is_empty() {
            return Err(format!("agents missing: {}", missing.join(", ")));
        }
        self.take(name, Busy::Tune)?;
        let result = self.driver.apply(name, to).await;
        self.release(name);
        result.map_err(|e| e.to_string())
    }

    /// Routes `job tuning` requests to `views` from now on (first call only).
    pub fn serve_tuning(&self, views: Arc<dyn TuningViews>) {
        let _ = self.tuning.set(views);
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    pub fn client(&self) -> &FlinkClient {
        &self.driver.client
    }

    pub fn ingest(&self) -> &IngestHandle {
        &self.ingest
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn register(&self, r: JobRegistration) -> JobReply {
        let jar = std::path::PathBuf::from(&r.jar);
        if !jar.is_file() {
            return JobReply::Refused(format!("no jar {} on the coordinator's host", r.jar));
        }
        let space = match r.space_toml.as_deref().map(SearchSpace::from_toml) {
            None => None,
            Some(Ok(space)) => Some(space),
            Some(Err(e)) => return JobReply::Refused(wire::clip(&e.to_string())),
        };
        let record = JobRecord {
            name: r.name,
            jar,
            entry_class: r.entry_class,
            args: r.args,
            qos_latency_ms: r.qos_latency_ms,
            qos_recovery_s: r.qos_recovery_s,
            space,
            savepoint_dir: r.savepoint_dir,
            current: None,
            registered_ms: now_ms(),
        };
        match self.journal.register(&record) {
            Ok(record) => {
                info!(job = %record.name, "job registered");
                JobReply::Registered(wire::job(&record, None, None))
            }
            Err(e) => JobReply::Refused(wire::clip(&e.to_string())),
        }
    }

    async fn apply(self: Arc<Self>, request: JobApply, replies: mpsc::Sender<JobReply>) {
        let name = request.job.clone();
        let admitted = self
            .journal
            .job(&name)
            .map_err(|e| e.to_string())
            .and_then(|job| {
                admission::admit_apply(&request, job.as_ref(), &self.missing_agents(), now_ms())
            })
            .and_then(|to| self.take(&name, Busy::Apply).map(|()| to));
        let to = match admitted {
            Ok(to) => to,
            Err(reason) => {
                let _ = replies.send(JobReply::Refused(wire::clip(&reason))).await;
                return;
            }
        };
        self.hub.subscribe(&name, replies.clone());
        let result = self.driver.apply(&name, to).await;
        let started = self.hub.unsubscribe(&name);
        self.release(&name);
        let reply = match result {
            Ok(op) => match op.outcome() {
                Some(outcome) => JobReply::Finished(OperationEnd {
                    op: op.id,
                    job: op.job.clone(),
                    elapsed_ms: now_ms().saturating_sub(op.started_ms),
                    outcome: wire::outcome(outcome),
                }),
                None => JobReply::Failed(format!("operation {} did not finish", op.id)),
            },
            Err(e) if started => JobReply::Failed(wire::clip(&e.to_string())),
            Err(e) => JobReply::Refused(wire::clip(&e.to_string())),
        };
        let _ = replies.send(reply).await;
    }

    async fn summary(&self, job: &JobRecord) -> demeter_common::protocol::jobs::JobSummary {
        let in_flight = self
            .journal
            .in_flight()
            .ok()
            .and_then(|ops| ops.into_iter().find(|o| o.job == job.name))
            .map(|o| o.id);
        let state: Option<JobState> = self.driver.current_state(job).await;
        wire::job(job, in_flight, state)
    }

    async fn answer(self: Arc<Self>, request: JobRequest, replies: mpsc::Sender<JobReply>) {
        let reply = match request {
            JobRequest::Register(r) => self.register(r),
            JobRequest::Apply(a) => return self.apply(a, replies).await,
            JobRequest::Show { job, operations } => match self.journal.job(&job) {
                Ok(Some(record)) => {
                    let summary = self.summary(&record).await;
                    match self.journal.operations(&job) {
                        Ok(ops) => JobReply::Details(wire::details(summary, &ops, operations)),
                        Err(e) => JobReply::Refused(e.to_string()),
                    }
                }
                Ok(None) => JobReply::Refused(format!("no registered job {job}")),
                Err(e) => JobReply::Refused(e.to_string()),
            },
            JobRequest::Tuning { job, last } => match self.tuning.get() {
                Some(views) => match views.view(&job, last) {
                    Ok(view) => JobReply::Tuning(Box::new(view)),
                    Err(e) => JobReply::Refused(wire::clip(&e)),
                },
                None => {
                    JobReply::Refused("this coordinator tunes no job ([tuning] is empty)".into())
                }
            },
            JobRequest::List => match self.journal.jobs() {
                Ok(jobs) => {
                    let mut out = Vec::new();
                    for job in &jobs {
                        out.push(self.summary(job).await);
                    }
                    JobReply::Jobs(wire::fit_list(out))
                }
                Err(e) => JobReply::Refused(e.to_string()),
            },
        };
        let _ = replies.send(reply).await;
    }
}

impl JobService for ExecutorService {
    fn handle(self: Arc<Self>, request: JobRequest, replies: mpsc::Sender<JobReply>) {
        tokio::spawn(self.answer(request, replies));
    }
}

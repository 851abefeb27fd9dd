//! The live loop's async shell for one tuned job: reads production through Flink's REST API and
//! the agents' samples every period, hands the readings to [`TunerCore`], and carries out its
//! commands — reconfigurations through the executor service (journaled, savepoint-safe, rolled
//! back on failure), profiling batches through the profiler — writing every decision to the
//! decision log. All deciding happens in the core and the policy, off the runtime's workers
//! ([`off_the_workers`]: a surrogate refit takes seconds).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::blocking::off_the_workers;
use super::board::Board;
use super::core::{Command, Reading, SendPolicy, TunerCore};
use super::log::DecisionEntry;
use super::settings::{CopiesOn, JobTuning, ProfilingSettings};
use crate::executor::driver::now_ms;
use crate::executor::journal::JobRecord;
use crate::executor::operation::Outcome;
use crate::executor::service::ExecutorService;
use crate::flink::{Aggregation, ClientConfig, FlinkClient, JobId};
use crate::models::observations::Observation;
use crate::models::space::{JobConfig, SearchSpace};
use crate::models::surrogate::Qos;
use crate::policy::baselines::{Fixed, Reactive, ReactiveSettings};
use crate::policy::demeter::DemeterConfig;
use crate::policy::{Action, ChangeKind};
use crate::profiler::agent_host::AgentHost;
use crate::profiler::batch::{BatchRequest, Recall, Runtime, Silent, run_batch};
use crate::profiler::host::{CopyHost, LocalHost};
use crate::profiler::plan::taskmanager_room;
use crate::profiler::{Layout, Resources, Surroundings};
use crate::{Error, Result};

/// How a command the shell started ended.
enum Done {
    Reconfigured {
        seq: Option<u64>,
        running: JobConfig,
        succeeded: bool,
        text: String,
    },
    Profiled {
        seq: Option<u64>,
        batch: u64,
        results: Vec<Observation>,
        text: String,
    },
}

/// One line of a `record_ticks` file.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct RecordedTick {
    /// Wall clock of the reading, ms since the Unix epoch.
    pub at_ms: u64,
    pub tick: crate::policy::JobTick,
}

/// QoS bounds used when the registration names none.
const DEFAULT_QOS: Qos = Qos {
    latency_p95_ms: 1_000.0,
    recovery_s: 120.0,
};

/// How often the policy is told the profiling room between batches.
const ROOM_EVERY: Duration = Duration::from_secs(15);

#[derive(Debug)]
pub struct Tuner {
    tuning: JobTuning,
    service: Arc<ExecutorService>,
    board: Arc<Board>,
    /// Per (job, source vertex): the metric ids to read there, found once the source reports
    /// them (see [`Tuner::source_metric_ids`]).
    source_metrics: std::sync::Mutex<HashMap<(String, String), Vec<String>>>,
}

impl Tuner {
    pub fn new(tuning: JobTuning, service: Arc<ExecutorService>, board: Arc<Board>) -> Self {
        board.tuned(&tuning.job, &tuning.policy);
        Self {
            tuning,
            service,
            board,
            source_metrics: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The source vertex's backlog gauges (`pendingRecords` under whatever operator name the
    /// source reports it) and the offered-rate gauge, as far as the vertex has them: Flink
    /// answers a request naming one unknown metric with nothing at all. Remembered once found.
    async fn source_metric_ids(
        &self,
        client: &FlinkClient,
        job: &JobId,
        vertex: &crate::flink::VertexId,
    ) -> Vec<String> {
        let key = (job.as_str().to_string(), vertex.as_str().to_string());
        if let Some(ids) = self
            .source_metrics
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return ids;
        }
        let Ok(listed) = client.vertex_subtask_metric_ids(job, vertex).await else {
            return Vec::new();
        };
        let offered = self.tuning.offered_rate_metric.as_deref();
        let ids: Vec<String> = listed
            .into_iter()
            .filter(|id| is_backlog_metric(id) || Some(id.as_str()) == offered)
            .collect();
        // Right after a start the gauges may not be registered yet: look again next time.
        if ids.iter().any(|id| is_backlog_metric(id))
            && let Ok(mut map) = self.source_metrics.lock()
        {
            // Earlier deployments' job ids are gone for good.
            map.retain(|(other, _), _| other == job.as_str());
            map.insert(key, ids.clone());
        }
        ids
    }

    /// Runs until the daemon stops: waits for the job to be registered and deployed, then
    /// tunes it.
    pub async fn run(self) {
        let job = self.tuning.job.clone();
        let record = self.wait_for_deployment().await;
        let qos_latency_ms = record
            .qos_latency_ms
            .map_or(DEFAULT_QOS.latency_p95_ms, |ms| ms as f64);
        let mut core = match build_policy(&self.tuning, &record) {
            Ok(policy) => TunerCore::new(policy, qos_latency_ms),
            Err(e) => {
                error!(job, error = %e, "ALERT: cannot build the tuning policy; the job is not tuned");
                return;
            }
        };
        info!(
            job,
            policy = core.policy_name(),
            period_s = self.tuning.period_secs,
            "tuning started"
        );
        let (done_tx, mut done_rx) = mpsc::channel::<Done>(8);
        let mut recall: Option<(u64, Recall)> = None;
        let period = Duration::from_secs(self.tuning.period_secs.max(1));
        let mut next_read = Instant::now();
        let mut next_room: Option<Instant> = None;
        loop {
            let timeout_at = core
                .poll_timeout_ms()
                .map(|ms| Instant::now() + Duration::from_millis(ms.saturating_sub(now_ms())));
            let wake = timeout_at.map_or(next_read, |t| t.min(next_read));
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {
                    if Instant::now() >= next_read {
                        if let Some(reading) = self.read().await {
                            // Between batches (a running one holds its room already).
                            let room_due = next_room.is_none_or(|t| Instant::now() >= t);
                            if let (true, None, Some(settings)) =
                                (room_due, &recall, &self.tuning.profiling)
                                && let Some(room) = profiling_room(settings, &self.service)
                            {
                                off_the_workers(|| core.handle_profiling_room(now_ms(), room));
                                next_room = Some(Instant::now() + ROOM_EVERY);
                            }
                            off_the_workers(|| core.handle_reading(now_ms(), &reading));
                            if let Some(view) = core.live() {
                                self.board.publish(&self.tuning.job, view);
                                self.record_tick(&view);
                            }
                        }
                        next_read = (next_read + period).max(Instant::now());
                    }
                    off_the_workers(|| core.handle_timeout(now_ms()));
                }
                Some(done) = done_rx.recv() => self.finished(&mut core, done, &mut recall),
            }
            while let Some(command) = core.poll_command() {
                self.execute(command, &done_tx, &mut recall);
            }
        }
    }

    async fn wait_for_deployment(&self) -> JobRecord {
        let mut logged = None::<Instant>;
        loop {
            match self.service.journal().job(&self.tuning.job) {
                Ok(Some(record)) if record.current.is_some() => return record,
                Ok(_) => {}
                Err(e) => {
                    warn!(job = %self.tuning.job, error = %e, "cannot read the job's registration")
                }
            }
            if logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(30)) {
                info!(job = %self.tuning.job, "tuning waits for the job to be registered and deployed");
                logged = Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    fn finished(&self, core: &mut TunerCore, done: Done, recall: &mut Option<(u64, Recall)>) {
        let job = &self.tuning.job;
        match done {
            Done::Reconfigured {
                seq,
                running,
                succeeded,
                text,
            } => {
                info!(job, %running, succeeded, outcome = %text, "reconfiguration ended");
                self.note_outcome(seq, &text);
                off_the_workers(|| core.handle_reconfigured(now_ms(), running, succeeded));
            }
            Done::Profiled {
                seq,
                batch,
                results,
                text,
            } => {
                info!(job, batch, measured = results.len(), outcome = %text, "profiling batch ended");
                if recall.as_ref().is_some_and(|(b, _)| *b == batch) {
                    *recall = None;
                }
                self.note_outcome(seq, &text);
                off_the_workers(|| core.handle_profiled(now_ms(), batch, &results));
            }
        }
    }

    fn record_tick(&self, view: &super::core::LiveView) {
        let Some(path) = &self.tuning.record_ticks else {
            return;
        };
        let line = RecordedTick {
            at_ms: view.at_ms,
            tick: view.tick,
        };
        let written = serde_json::to_string(&line)
            .map_err(std::io::Error::other)
            .and_then(|text| {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?;
                writeln!(file, "{text}")
            });
        if let Err(e) = written {
            warn!(job = %self.tuning.job, path = %path.display(), error = %e, "cannot record a tick");
        }
    }

    fn note_outcome(&self, seq: Option<u64>, text: &str) {
        if let Some(seq) = seq
            && let Err(e) = self.board.log().set_outcome(&self.tuning.job, seq, text)
        {
            warn!(job = %self.tuning.job, error = %e, "cannot record a decision's outcome");
        }
    }

    fn record(&self, policy: &str, action: &Action) -> Option<u64> {
        let (text, decision) = match action {
            Action::Reconfigure { to, kind, decision } => (
                format!(
                    "reconfigure {} to {to}",
                    match kind {
                        ChangeKind::InPlace => "in place",
                        ChangeKind::FullRestart => "with a restart",
                    }
                ),
                decision,
            ),
            Action::Profile {
                candidates,
                rate,
                decision,
                ..
            } => (
                format!("profile {} copies at {rate:.0}/s", candidates.len()),
                decision,
            ),
        };
        info!(job = %self.tuning.job, action = %text, reason = ?decision.reason, "decision");
        let entry = DecisionEntry {
            seq: 0,
            at_ms: now_ms(),
            policy: policy.to_string(),
            action: text,
            decision: decision.clone(),
            outcome: None,
        };
        match self.board.log().append(&self.tuning.job, entry) {
            Ok(seq) => Some(seq),
            Err(e) => {
                warn!(job = %self.tuning.job, error = %e, "cannot record a decision");
                None
            }
        }
    }

    fn execute(
        &self,
        command: Command,
        done: &mpsc::Sender<Done>,
        recall: &mut Option<(u64, Recall)>,
    ) {
        let job = self.tuning.job.clone();
        match command {
            Command::Recall { batch, reason } => {
                if let Some((b, flag)) = recall.as_ref()
                    && *b == batch
                {
                    info!(job, batch, %reason, "recalling the profiling batch: production wins");
                    flag.recall(&reason);
                }
            }
            Command::Carry(action) if matches!(*action, Action::Reconfigure { .. }) => {
                let seq = self.record(&self.tuning.policy, &action);
                let Action::Reconfigure { to, .. } = *action else {
                    return;
                };
                let service = self.service.clone();
                let done = done.clone();
                tokio::spawn(async move {
                    let before = service
                        .journal()
                        .job(&job)
                        .ok()
                        .flatten()
                        .and_then(|r| r.current)
                        .map(|d| d.config);
                    let (running, succeeded, text) = match service.apply_for_tuner(&job, to).await {
                        Ok(op) => match op.outcome() {
                            Some(Outcome::Applied(d)) => (
                                d.config,
                                true,
                                format!(
                                    "applied ({:?}, {:.1} s)",
                                    op.strategy,
                                    now_ms().saturating_sub(op.started_ms) as f64 / 1000.0
                                ),
                            ),
                            Some(Outcome::RolledBack { deployment, reason }) => {
                                (deployment.config, false, format!("rolled back: {reason}"))
                            }
                            Some(Outcome::Aborted { reason }) => {
                                (before.unwrap_or(to), false, format!("aborted: {reason}"))
                            }
                            Some(Outcome::NotStarted { reason }) => (
                                before.unwrap_or(to),
                                false,
                                format!("not started: {reason}"),
                            ),
                            None => (
                                before.unwrap_or(to),
                                false,
                                format!("operation {} did not finish", op.id),
                            ),
                        },
                        Err(reason) => (before.unwrap_or(to), false, format!("refused: {reason}")),
                    };
                    let _ = done
                        .send(Done::Reconfigured {
                            seq,
                            running,
                            succeeded,
                            text,
                        })
                        .await;
                });
            }
            Command::Carry(action) => {
                let Action::Profile { batch, .. } = *action else {
                    return;
                };
                let seq = self.record(&self.tuning.policy, &action);
                let done = done.clone();
                let Some(settings) = self.tuning.profiling.clone() else {
                    let text =
                        "no [tuning.jobs.profiling] configured: nothing measured".to_string();
                    tokio::spawn(async move {
                        let _ = done
                            .send(Done::Profiled {
                                seq,
                                batch,
                                results: Vec::new(),
                                text,
                            })
                            .await;
                    });
                    return;
                };
                let flag = Recall::default();
                *recall = Some((batch, flag.clone()));
                let record = self.service.journal().job(&job).ok().flatten();
                let latency_metric = self.tuning.latency_metric.clone();
                let host = copy_host(&settings, &self.service);
                tokio::spawn(async move {
                    let outcome = match host {
                        Ok(host) => {
                            profile(&settings, host, &latency_metric, record, &action, &flag).await
                        }
                        Err(e) => Err(e),
                    };
                    let (results, text) = match outcome {
                        Ok((results, text)) => (results, text),
                        Err(e) => (Vec::new(), format!("failed: {e}")),
                    };
                    let _ = done
                        .send(Done::Profiled {
                            seq,
                            batch,
                            results,
                            text,
                        })
                        .await;
                });
            }
        }
    }

    /// One reading of production: the journal's deployment, Flink's figures for its job, and
    /// the agents' latest samples of its TaskManagers. None while nothing is deployed.
    async fn read(&self) -> Option<Reading> {
        let record = self
            .service
            .journal()
            .job(&self.tuning.job)
            .ok()
            .flatten()?;
        let deployment = record.current?;
        let client = self.service.client();
        let jvms = self
            .service
            .ingest()
            .latest_jvms(&format!("{}-tm", self.tuning.job));
        let mut reading = Reading {
            config: deployment.config,
            snapshot: None,
            fully_running: false,
            latency_p95_ms: None,
            backlog: None,
            offered_rate: None,
            jvms,
        };
        let job = &deployment.job_id;
        let Ok(details) = client.job_details(job).await else {
            return Some(reading);
        };
        reading.fully_running = details.is_fully_running();
        reading.snapshot = client.job_metrics_snapshot_of(&details).await.ok();
        let sources: Vec<_> = details
            .source_vertices()
            .iter()
            .map(|v| v.id.clone())
            .collect();
        for v in &details.vertices {
            let is_source = sources.contains(&v.id);
            let source_ids = if is_source {
                self.source_metric_ids(client, job, &v.id).await
            } else {
                Vec::new()
            };
            let names: Vec<&str> = if is_source {
                source_ids.iter().map(String::as_str).collect()
            } else {
                vec![self.tuning.latency_metric.as_str()]
            };
            if names.is_empty() {
                continue;
            }
            let Ok(m) = vertex_max_sum(client, job, &v.id, &names).await else {
                continue;
            };
            if is_source {
                for id in source_ids.iter().filter(|id| is_backlog_metric(id)) {
                    reading.backlog = add(reading.backlog, m.get(id).and_then(|a| a.sum));
                }
                if let Some(name) = &self.tuning.offered_rate_metric {
                    // Every reader reports the total it is asked for: the max is the total.
                    reading.offered_rate =
                        max(reading.offered_rate, m.get(name).and_then(|a| a.max));
                }
            } else {
                let latency = m.get(&self.tuning.latency_metric).and_then(|a| a.max);
                reading.latency_p95_ms =
                    max(reading.latency_p95_ms, latency.filter(|l| l.is_finite()));
            }
        }
        Some(reading)
    }
}

async fn vertex_max_sum(
    client: &FlinkClient,
    job: &JobId,
    vertex: &crate::flink::VertexId,
    names: &[&str],
) -> Result<crate::flink::AggregatedMetrics> {
    client
        .vertex_subtask_metrics(job, vertex, names, &[Aggregation::Max, Aggregation::Sum])
        .await
}

/// Flink's standard source backlog metric, alone or under the source operator's name.
fn is_backlog_metric(id: &str) -> bool {
    id == "pendingRecords" || id.ends_with(".pendingRecords")
}

fn add(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

fn max(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The policy named in the tuning entry, over the registration's search space and QoS.
pub fn build_policy(tuning: &JobTuning, record: &JobRecord) -> Result<SendPolicy> {
    let space = record.space.clone().unwrap_or_default();
    let qos = Qos {
        latency_p95_ms: record
            .qos_latency_ms
            .map_or(DEFAULT_QOS.latency_p95_ms, |ms| ms as f64),
        recovery_s: record
            .qos_recovery_s
            .map_or(DEFAULT_QOS.recovery_s, |s| s as f64),
    };
    policy_named(
        &tuning.policy,
        space,
        qos,
        tuning.demeter.clone(),
        tuning.seed,
    )
}

/// A policy that can tune a live job, by name (`demeter`, `reactive`, `static`).
pub fn policy_named(
    name: &str,
    space: SearchSpace,
    qos: Qos,
    demeter: DemeterConfig,
    seed: u64,
) -> Result<SendPolicy> {
    Ok(match name {
        "static" => Box::new(Fixed),
        "reactive" => Box::new(Reactive::new(space, ReactiveSettings::default())),
        "demeter" => Box::new(crate::policy::demeter::demeter_policy(
            space, qos, demeter, seed,
        )?),
        other => {
            return Err(Error::Policy(format!(
                "policy {other:?} cannot tune a live job"
            )));
        }
    })
}

/// Where this batch's copies run, per `copies_on` (see [`CopiesOn`]).
fn copy_host(settings: &ProfilingSettings, service: &ExecutorService) -> Result<Arc<dyn CopyHost>> {
    copy_host_logged(settings, service, true)
}

/// The host for copies: the agents when they may and can run them, else this host.
/// `log`: say which (once per batch; not on every room report).
fn copy_host_logged(
    settings: &ProfilingSettings,
    service: &ExecutorService,
    log: bool,
) -> Result<Arc<dyn CopyHost>> {
    let executor = service.settings();
    let agents = AgentHost::new(
        service.ingest().clone(),
        settings
            .agent_cluster
            .clone()
            .unwrap_or_else(|| executor.cluster.clone()),
        executor.agents.clone(),
        settings.node_reserve,
        settings.node_cpu_check,
    );
    let local = || -> Result<Arc<dyn CopyHost>> {
        Ok(Arc::new(LocalHost::new(
            settings.flink_home.clone(),
            f64::from(settings.host_reserve_mb),
        )?))
    };
    match settings.copies_on {
        CopiesOn::Local => local(),
        _ if agents.usable() => {
            if log {
                info!(cluster = %agents.cluster(), "profiling copies' TaskManagers run on the agents");
            }
            Ok(Arc::new(agents))
        }
        CopiesOn::Agents => Err(Error::Policy(
            "profiling copies_on = \"agents\" but no agent is connected with a recent sample"
                .into(),
        )),
        CopiesOn::Auto => {
            if log {
                warn!(
                    "no agent connected with a recent sample: profiling copies' TaskManagers run \
                     on the coordinator's host"
                );
            }
            local()
        }
    }
}

fn layout(settings: &ProfilingSettings) -> Layout {
    Layout {
        rest_ports: settings.rest_ports,
        rpc_ports: settings.rpc_ports,
        root: settings.work_dir.clone(),
        jm_memory_mb: settings.jm_memory_mb,
        jm_cpu_cores: 0.25,
        cap: settings.cap,
        jobmanager_address: settings.jobmanager_address.clone(),
    }
}

/// What a profiling copy's TaskManagers could get now (None: profiling is not configured or
/// no host can run copies).
fn profiling_room(settings: &ProfilingSettings, service: &ExecutorService) -> Option<Resources> {
    let host = copy_host_logged(settings, service, false).ok()?;
    let around = Surroundings {
        host_available: host.available(),
        jobmanagers_elsewhere: host.jobmanagers_elsewhere(),
        ..Surroundings::default()
    };
    Some(taskmanager_room(&layout(settings), &around))
}

/// Runs one profiling batch for `action` with the job's registered jar.
async fn profile(
    settings: &ProfilingSettings,
    host: Arc<dyn CopyHost>,
    latency_metric: &str,
    record: Option<JobRecord>,
    action: &Action,
    recall: &Recall,
) -> Result<(Vec<Observation>, String)> {
    let record = record.ok_or_else(|| Error::Policy("the job is no longer registered".into()))?;
    let request = BatchRequest::from_action(action, &settings.args)
        .ok_or_else(|| Error::Policy("not a profiling action".into()))?;
    std::fs::create_dir_all(&settings.work_dir).map_err(|source| Error::Io {
        context: format!("creating {}", settings.work_dir.display()),
        source,
    })?;
    let runtime = Arc::new(Runtime {
        flink_home: settings.flink_home.clone(),
        jar: record.jar.clone(),
        entry_class: record.entry_class.clone(),
        latency_metric: latency_metric.to_string(),
        times: settings.times(),
        host,
        client: ClientConfig::default(),
    });
    let layout = layout(settings);
    let report = run_batch(
        runtime,
        &layout,
        &request,
        Resources::default(),
        recall,
        Arc::new(Silent),
    )
    .await?;
    let results = report.observations();
    let text = format!(
        "{} measured, {} copies, {} skipped, {:.0} s",
        results.len(),
        report.copies.len(),
        report.skipped.len(),
        report.wall_ms as f64 / 1000.0
    );
    Ok((results, text))
}

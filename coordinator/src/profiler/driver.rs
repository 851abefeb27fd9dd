//! The async shell around one [`CopyMachine`]: carries out its effects (config dir and
//! JobManager child, TaskManagers through the executor's backend, jar upload and run, REST
//! readings, the kill through `executor::failure`, the tear-down) and feeds the answers back
//! with the wall clock. No decision is taken here.

use std::sync::Arc;
use std::time::Duration;

use rustix::process::Signal;
use tokio::sync::watch;

use super::batch::{Progress, Runtime};
use super::conf;
use super::host;
use super::kept_logs;
use super::machine::{CopyMachine, CopyReport, Effect, Event, Phase};
use super::measure::{CheckpointTiming, CopySample, VertexBusy};
use super::plan::CopyPlan;
use crate::executor::driver::now_ms;
use crate::executor::failure::{UNREGISTERED_WITHIN, kill_and_replace, source_records};
use crate::executor::taskmanagers::TaskManagers;
use crate::flink::{Aggregation, FlinkClient, JarRunRequest, JobId};
use crate::{Error, Result};

/// One copy's shell state.
pub(super) struct CopyShell {
    runtime: Arc<Runtime>,
    plan: CopyPlan,
    java_opts: String,
    client: FlinkClient,
    taskmanagers: Arc<dyn TaskManagers>,
    jobmanager: Option<tokio::process::Child>,
    job: Option<JobId>,
    interval_ms: Option<u64>,
}

impl CopyShell {
    pub(super) fn new(runtime: Arc<Runtime>, plan: CopyPlan, java_opts: String) -> Result<Self> {
        let client = FlinkClient::new(
            &format!("http://127.0.0.1:{}", plan.rest_port),
            runtime.client.clone(),
        )?;
        let taskmanagers = runtime.host.taskmanagers(&plan);
        Ok(Self {
            runtime,
            plan,
            java_opts,
            client,
            taskmanagers,
            jobmanager: None,
            job: None,
            interval_ms: None,
        })
    }

    pub(super) async fn run(
        mut self,
        mut recall: watch::Receiver<Option<String>>,
        progress: Arc<dyn Progress>,
    ) -> CopyReport {
        let victim = self
            .plan
            .taskmanagers
            .first()
            .map_or_else(String::new, |t| t.id.clone());
        let t0 = now_ms();
        let mut m = CopyMachine::new(
            t0,
            &self.plan.name,
            self.plan.config,
            self.plan.rate,
            &victim,
            self.runtime.times.clone(),
        );
        let mut shown = None;
        loop {
            if shown != Some(m.phase()) {
                shown = Some(m.phase());
                progress.phase(&self.plan.name, m.phase(), now_ms().saturating_sub(t0));
            }
            if let Some(effect) = m.poll_effect() {
                // Production's recall interrupts anything but the tear-down itself.
                let abortable = !matches!(effect, Effect::TearDown { .. });
                tokio::select! {
                    event = self.execute(&effect) => m.handle_event(now_ms(), &effect, event),
                    reason = recalled(&mut recall), if abortable => m.abort(now_ms(), &reason),
                }
                continue;
            }
            if m.is_done() {
                break;
            }
            let wait = m
                .poll_timeout()
                .map_or(1_000, |at| at.saturating_sub(now_ms()));
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(wait)) => m.handle_timeout(now_ms()),
                reason = recalled(&mut recall), if m.phase() != Phase::TearingDown => {
                    m.abort(now_ms(), &reason);
                }
            }
        }
        let report = m.report().unwrap_or_else(|| unreachable_report(&self.plan));
        progress.finished(&report);
        report
    }

    async fn execute(&mut self, effect: &Effect) -> Event {
        let result = match effect {
            Effect::Provision => self.provision().await.map(|()| Event::Provisioned),
            Effect::CheckCluster => self.check_cluster().await,
            Effect::Submit => self.submit().await.map(|()| Event::Submitted),
            Effect::Sample => self.sample().await.map(|s| Event::Sample(Box::new(s))),
            Effect::Kill { victim } => kill_and_replace(
                &self.client,
                self.taskmanagers.as_ref(),
                &self.plan.name,
                &self.plan.taskmanagers,
                victim,
                Duration::from_secs(30),
                UNREGISTERED_WITHIN,
            )
            .await
            .map(|at_ms| Event::Killed { at_ms }),
            Effect::TearDown { keep_logs } => {
                self.tear_down(*keep_logs).await.map(|()| Event::TornDown)
            }
        };
        result.unwrap_or_else(|e| Event::Failed {
            message: e.to_string(),
        })
    }

    async fn provision(&mut self) -> Result<()> {
        let io = |context: String| move |source| Error::Io { context, source };
        for dir in self.plan.subdirs() {
            std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        let shipped = self.runtime.flink_home.join("conf");
        for entry in std::fs::read_dir(&shipped)
            .map_err(io(format!("reading {}", shipped.display())))?
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("log4j") || name.starts_with("logback") {
                std::fs::copy(entry.path(), self.plan.conf_dir().join(&name))
                    .map_err(io(format!("copying {name}")))?;
            }
        }
        let config = self.plan.conf_dir().join("config.yaml");
        std::fs::write(&config, conf::config_yaml(&self.plan, &self.java_opts))
            .map_err(io(format!("writing {}", config.display())))?;
        self.jobmanager = Some(host::spawn_jobmanager(
            &self.runtime.flink_home,
            &self.plan,
        )?);
        self.taskmanagers
            .ensure(&self.plan.name, &self.plan.taskmanagers)
            .await
    }

    async fn check_cluster(&mut self) -> Result<Event> {
        let kept = kept_logs::failed_root(&self.plan.dir);
        if let Some(jm) = self.jobmanager.as_mut()
            && let Ok(Some(status)) = jm.try_wait()
        {
            return Ok(Event::Exited {
                what: format!(
                    "JobManager exited ({status}); its logs are kept under {}",
                    kept.display()
                ),
            });
        }
        // Not answering yet is normal while the JobManager starts; the deadline bounds it.
        let (taskmanagers, slots) = if host::port_free(self.plan.rest_port) {
            (0, 0)
        } else {
            self.client
                .overview()
                .await
                .map_or((0, 0), |o| (o.taskmanagers, o.slots_total))
        };
        if (taskmanagers as usize) < self.plan.taskmanagers.len() {
            let alive = self.taskmanagers.alive(&self.plan.name).await?;
            if let Some(dead) = self
                .plan
                .taskmanagers
                .iter()
                .find(|t| !alive.contains(&t.id))
            {
                return Ok(Event::Exited {
                    what: format!(
                        "TaskManager {} exited before it registered (its log: where it ran, \
                         or under {})",
                        dead.id,
                        kept.display()
                    ),
                });
            }
        }
        Ok(Event::Cluster {
            taskmanagers,
            slots,
        })
    }

    async fn submit(&mut self) -> Result<()> {
        let jar = self.client.upload_jar(&self.runtime.jar).await?;
        let request = JarRunRequest {
            entry_class: Some(self.runtime.entry_class.clone()),
            program_args_list: self.plan.program_args.clone(),
            parallelism: Some(self.plan.config.parallelism),
            flink_configuration: self.plan.flink_configuration.clone(),
            ..JarRunRequest::default()
        };
        let job = self.client.run_jar(&jar, &request).await?;
        tracing::info!(copy = %self.plan.name, %job, args = ?self.plan.program_args, "profiling job submitted");
        self.job = Some(job);
        Ok(())
    }

    async fn sample(&mut self) -> Result<CopySample> {
        let job = self
            .job
            .clone()
            .ok_or_else(|| Error::Executor("no job submitted".into()))?;
        let details = self.client.job_details(&job).await?;
        let restarts = self
            .client
            .job_metrics(&job, &["numRestarts"])
            .await?
            .number("numRestarts")
            .unwrap_or(0.0);
        let sources: Vec<_> = details
            .source_vertices()
            .iter()
            .map(|v| v.id.clone())
            .collect();
        let metric = self.runtime.latency_metric.as_str();
        let (mut busy, mut backpressure, mut latency) = (Vec::new(), None::<f64>, None::<f64>);
        for v in &details.vertices {
            if sources.contains(&v.id) {
                let m = self
                    .client
                    .vertex_subtask_metrics(
                        &job,
                        &v.id,
                        &["backPressuredTimeMsPerSecond"],
                        &[Aggregation::Max],
                    )
                    .await?;
                let bp = m.get("backPressuredTimeMsPerSecond").and_then(|a| a.max);
                backpressure = max_opt(backpressure, bp);
                continue;
            }
            let m = self
                .client
                .vertex_subtask_metrics(
                    &job,
                    &v.id,
                    &["busyTimeMsPerSecond", metric],
                    &[Aggregation::Max, Aggregation::Avg],
                )
                .await?;
            let finite = |x: Option<f64>| x.filter(|v| v.is_finite());
            latency = max_opt(latency, finite(m.get(metric).and_then(|a| a.max)));
            busy.push(VertexBusy {
                parallelism: v.parallelism,
                accumulated_busy_ms: v.metrics.as_ref().and_then(|m| m.accumulated_busy_time),
                busy_ms_per_second: finite(m.get("busyTimeMsPerSecond").and_then(|a| a.avg)),
            });
        }
        if self.interval_ms.is_none() {
            self.interval_ms = self
                .client
                .checkpoint_config(&job)
                .await
                .ok()
                .and_then(|c| u64::try_from(c.interval).ok());
        }
        let last_completed = self
            .client
            .checkpoint_stats(&job)
            .await
            .ok()
            .and_then(|s| s.latest.completed)
            .and_then(|c| u64::try_from(c.trigger_timestamp).ok());
        Ok(CopySample {
            fully_running: details.is_fully_running(),
            parallelism: details.vertices.iter().map(|v| v.parallelism).collect(),
            restarts,
            source_records: source_records(&details),
            busy,
            source_backpressure_ms: backpressure,
            latency_p95_ms: latency,
            checkpoint: self.interval_ms.map(|interval_ms| CheckpointTiming {
                last_completed_trigger_ms: last_completed,
                interval_ms,
            }),
            usage: self.runtime.host.usage(&self.plan),
        })
    }

    /// Kills every process of the copy (TaskManagers through the backend, the JobManager's
    /// process group, then anything else naming the copy's directory), waits for its ports,
    /// removes its directory (its logs moved aside first when `keep_logs`, see [`kept_logs`]), and
    /// checks that nothing is left.
    async fn tear_down(&mut self, keep_logs: bool) -> Result<()> {
        let name = self.plan.name.clone();
        if let Ok(alive) = self.taskmanagers.alive(&name).await {
            for id in alive {
                // A profiling copy has nothing to save: SIGKILL frees the resources fastest.
                let _ = self.taskmanagers.kill(&id).await;
            }
        }
        if let Some(mut jm) = self.jobmanager.take() {
            if let Some(pid) = jm.id() {
                host::signal_group(pid, Signal::KILL);
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), jm.wait()).await;
        }
        let dir = self.plan.dir.clone();
        let gone = host::wait_until(Duration::from_secs(20), || {
            let left = host::processes_naming(&dir);
            for pid in &left {
                host::kill_hard(*pid);
            }
            left.is_empty()
        })
        .await;
        // The backend must confirm none of the copy's TaskManagers lives (agents on other
        // nodes are beyond the search by directory above); this also reaps local children.
        let tms_gone = self.taskmanagers_gone(&name, Duration::from_secs(20)).await;
        let gone = gone && tms_gone;
        let (rest, rpc) = (self.plan.rest_port, self.plan.rpc_port);
        let ports = host::wait_until(Duration::from_secs(20), || {
            host::port_free(rest) && host::port_free(rpc)
        })
        .await;
        if keep_logs {
            match kept_logs::keep(&dir, &name, now_ms(), kept_logs::KEEP) {
                Ok(Some(logs)) => {
                    tracing::warn!(copy = %name, logs = %logs.display(), "failed copy's logs kept");
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(copy = %name, error = %e, "keeping the failed copy's logs")
                }
            }
        }
        let removed = match std::fs::remove_dir_all(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => {
                tracing::warn!(copy = %name, error = %e, "removing the copy's directory");
                false
            }
        };
        self.runtime.host.release(&self.plan);
        tracing::info!(copy = %name, gone, ports, removed, "profiling copy torn down");
        match (gone, ports, removed) {
            (true, true, true) => Ok(()),
            _ => Err(Error::Executor(format!(
                "tear-down of {name} incomplete: processes gone {gone}, ports {rest}/{rpc} free \
                 {ports}, directory removed {removed}"
            ))),
        }
    }
}

impl CopyShell {
    /// Whether the backend reports none of the copy's TaskManagers alive within `within`
    /// (polled every 200 ms; an unanswered question counts as not gone).
    async fn taskmanagers_gone(&self, name: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match self.taskmanagers.alive(name).await {
                Ok(alive) if alive.is_empty() => return true,
                Ok(alive) => tracing::debug!(copy = name, ?alive, "TaskManagers still alive"),
                Err(e) => tracing::warn!(copy = name, error = %e, "asking for the TaskManagers"),
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// Resolves when the recall flag is raised (never if its sender is gone).
async fn recalled(recall: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(reason) = recall.borrow_and_update().clone() {
            return reason;
        }
        if recall.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn unreachable_report(plan: &CopyPlan) -> CopyReport {
    CopyReport {
        name: plan.name.clone(),
        config: plan.config,
        rate: plan.rate,
        outcome: super::CopyOutcome::Failed("the copy ended without a report".into()),
        startup_ms: None,
        recovery: None,
        teardown_error: None,
        started_ms: 0,
        finished_ms: now_ms(),
    }
}

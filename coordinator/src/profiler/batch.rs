//! A profiling batch: plan it (cap, ports, directories), run the admitted copies in parallel
//! (each through [`super::driver`]), and take everything back at once when production needs
//! it — on the caller's [`Recall`], or on this host when its free memory falls below the
//! reserve.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::conf;
use super::driver::CopyShell;
use super::host::{self, CopyHost};
use super::machine::{CopyReport, Phase, Times};
use super::plan::{Admission, Layout, Resources, Surroundings, plan_batch};
use crate::executor::driver::now_ms;
use crate::flink::ClientConfig;
use crate::models::observations::Observation;
use crate::models::space::JobConfig;
use crate::policy::Action;
use crate::{Error, Result};

/// What every copy of a batch shares.
#[derive(Debug)]
pub struct Runtime {
    pub flink_home: PathBuf,
    pub jar: PathBuf,
    pub entry_class: String,
    /// The job's latency metric (max over the vertices and subtasks that report it).
    pub latency_metric: String,
    pub times: Times,
    pub host: Arc<dyn CopyHost>,
    pub client: ClientConfig,
}

/// Progress of a batch, for people watching.
pub trait Progress: Send + Sync {
    fn phase(&self, _copy: &str, _phase: Phase, _since_start_ms: u64) {}
    fn skipped(&self, _config: &JobConfig, _reason: &str) {}
    fn finished(&self, _report: &CopyReport) {}
}

/// A progress sink that says nothing.
#[derive(Debug)]
pub struct Silent;
impl Progress for Silent {}

/// The flag production (or the caller) raises to take the resources back: every running copy
/// of the batch is torn down at once and reported aborted with the reason.
#[derive(Debug, Clone)]
pub struct Recall(Arc<watch::Sender<Option<String>>>);

impl Default for Recall {
    fn default() -> Self {
        Self(Arc::new(watch::channel(None).0))
    }
}

impl Recall {
    pub fn recall(&self, reason: &str) {
        self.0.send_replace(Some(reason.to_string()));
    }
    pub(super) fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.0.subscribe()
    }
}

/// A batch's copies, as ordered.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRequest {
    pub batch: u64,
    pub candidates: Vec<JobConfig>,
    pub rate: f64,
    /// The registered profiling arguments, e.g. `--rate {rate} --sink discard`.
    pub template: String,
}

impl BatchRequest {
    /// The batch a policy's [`Action::Profile`] orders (`None` for other actions), with the
    /// job's registered profiling template. Its [`BatchReport::observations`] go back through
    /// [`crate::policy::Policy::handle_profile_results`] with the same batch number.
    pub fn from_action(action: &Action, template: &str) -> Option<Self> {
        match action {
            Action::Profile {
                batch,
                candidates,
                rate,
                ..
            } => Some(Self {
                batch: *batch,
                candidates: candidates.clone(),
                rate: *rate,
                template: template.to_string(),
            }),
            Action::Reconfigure { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct BatchReport {
    pub batch: u64,
    pub copies: Vec<CopyReport>,
    pub skipped: Vec<(JobConfig, String)>,
    pub wall_ms: u64,
}

impl BatchReport {
    /// The measurements, for the models and the policy.
    pub fn observations(&self) -> Vec<Observation> {
        self.copies
            .iter()
            .filter_map(|c| match &c.outcome {
                super::CopyOutcome::Measured(o) => Some(*o),
                _ => None,
            })
            .collect()
    }
}

/// Plans `request` (cap, ports, directories) and runs the admitted copies in parallel until
/// each is torn down. `in_use` is what other profiling holds now.
pub async fn run_batch(
    runtime: Arc<Runtime>,
    layout: &Layout,
    request: &BatchRequest,
    in_use: Resources,
    recall: &Recall,
    progress: Arc<dyn Progress>,
) -> Result<BatchReport> {
    let started = now_ms();
    let ports = layout.rest_ports.ports().chain(layout.rpc_ports.ports());
    let around = Surroundings {
        busy_ports: host::busy_ports(ports),
        profiling_in_use: in_use,
        host_available: runtime.host.available(),
        jobmanagers_elsewhere: runtime.host.jobmanagers_elsewhere(),
    };
    let admissions = plan_batch(
        request.batch,
        &request.candidates,
        request.rate,
        &request.template,
        layout,
        &around,
    )?;
    let java_opts = std::fs::read_to_string(runtime.flink_home.join("conf/config.yaml"))
        .ok()
        .and_then(|text| conf::shipped_java_opts(&text))
        .ok_or_else(|| {
            Error::Executor(format!(
                "no env.java.opts.all in {}/conf/config.yaml",
                runtime.flink_home.display()
            ))
        })?;
    let mut skipped = Vec::new();
    let mut tasks = Vec::new();
    for admission in admissions {
        match admission {
            Admission::Skipped { config, reason } => {
                tracing::info!(%config, reason, "profiling copy skipped");
                progress.skipped(&config, &reason);
                skipped.push((config, reason));
            }
            Admission::Start(plan) => {
                let copy = CopyShell::new(runtime.clone(), *plan, java_opts.clone())?;
                let (recall, progress) = (recall.subscribe(), progress.clone());
                tasks.push(tokio::spawn(copy.run(recall, progress)));
            }
        }
    }
    let watcher = tokio::spawn(watch_host_memory(runtime.clone(), recall.clone()));
    let mut copies = Vec::new();
    for task in tasks {
        copies.push(
            task.await
                .map_err(|e| Error::Executor(format!("profiling copy task: {e}")))?,
        );
    }
    watcher.abort();
    Ok(BatchReport {
        batch: request.batch,
        copies,
        skipped,
        wall_ms: now_ms().saturating_sub(started),
    })
}

/// Production always wins: when free memory where copies run drops below the reserve, every
/// copy of the batch is recalled.
async fn watch_host_memory(runtime: Arc<Runtime>, recall: Recall) {
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        if let Some(reason) = runtime.host.pressed() {
            tracing::warn!(reason, "recalling the profiling copies");
            recall.recall(&reason);
            return;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::policy::decision::{Decision, Reason};

    #[test]
    fn a_profile_action_becomes_a_batch_and_a_reconfiguration_does_not() {
        let candidates: Vec<JobConfig> = vec!["p=2,slots=1,mem=1g,cpu=1,ckpt=10s".parse().unwrap()];
        let decision = Decision {
            at: Duration::from_secs(600),
            reason: Reason::ProfileUncertain {
                miss_probability: 0.4,
            },
            forecast: None,
            chosen: None,
            best_rejected: None,
        };
        let action = Action::Profile {
            batch: 4,
            candidates: candidates.clone(),
            rate: 2500.0,
            decision: decision.clone(),
        };
        let request = BatchRequest::from_action(&action, "--rate {rate} --sink discard").unwrap();
        assert_eq!(
            request,
            BatchRequest {
                batch: 4,
                candidates: candidates.clone(),
                rate: 2500.0,
                template: "--rate {rate} --sink discard".into(),
            }
        );
        let reconfigure = Action::Reconfigure {
            to: candidates[0],
            kind: crate::policy::ChangeKind::FullRestart,
            decision,
        };
        assert_eq!(BatchRequest::from_action(&reconfigure, "x"), None);
    }
}

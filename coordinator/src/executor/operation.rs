//! The durable record of one reconfiguration: what the journal stores and `job show` prints.

use serde::{Deserialize, Serialize};

use super::plan::Strategy;
use crate::flink::{JobId, TriggerId};
use crate::models::space::JobConfig;

/// A job running in a known configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    pub config: JobConfig,
    pub job_id: JobId,
    /// Indices `i` of its TaskManagers `<job>-tm<i>` when they are not `0..task_managers()`:
    /// an in-place scale-in keeps the TaskManagers Flink left the job's subtasks on, whichever
    /// they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taskmanagers: Option<Vec<u32>>,
}

impl Deployment {
    /// Indices of the TaskManagers the job has.
    pub fn taskmanager_indices(&self) -> Vec<u32> {
        self.taskmanagers
            .clone()
            .unwrap_or_else(|| (0..self.config.task_managers()).collect())
    }
}

/// One step of a reconfiguration. Forward and rollback share the steps that bring a
/// configuration up; which configuration is the target follows from the [`Phase`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// Stop the old job with a savepoint (`POST /jobs/<id>/stop`, then poll the trigger).
    Stop,
    /// A stop whose outcome is unknown (lost answer, deadline, crash): watch the old job until
    /// it either runs on without a pending savepoint or finished with a completed one.
    ResolveStop,
    /// Start/restart/stop TaskManagers so exactly the target configuration's ones run.
    TaskManagers,
    /// Wait until Flink lists exactly those TaskManagers with the target slots and memory.
    WaitTaskManagers,
    /// Submit the jar with a fixed job id, the target parallelism and checkpoint interval,
    /// from the restore point.
    Submit,
    /// Wait until the job runs at the target parallelism and its sources emit records.
    WaitRunning,
    /// In-place parallelism change through the adaptive scheduler.
    Rescale,
    /// After an in-place scale-in: stop the TaskManagers Flink reports holding none of the
    /// job's subtasks, as many as the new configuration no longer needs.
    Release,
    /// Rollback: stop the job this operation submitted (with a savepoint while it runs).
    StopNew,
    /// Rollback: cancel the submitted job when it cannot take a savepoint.
    CancelNew,
    /// Rollback: find the newest completed snapshot to restore the old configuration from.
    RestorePoint,
    /// Nothing left to do; see the [`Phase::Finished`] outcome.
    Done,
}

impl Step {
    /// Stable name used in logs, the CLI and failpoints (`DEMETER_FAILPOINT=after-step:submit`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::ResolveStop => "resolve-stop",
            Self::TaskManagers => "taskmanagers",
            Self::WaitTaskManagers => "wait-taskmanagers",
            Self::Submit => "submit",
            Self::WaitRunning => "wait-running",
            Self::Rescale => "rescale",
            Self::Release => "release",
            Self::StopNew => "stop-new",
            Self::CancelNew => "cancel-new",
            Self::RestorePoint => "restore-point",
            Self::Done => "done",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Phase {
    Forward,
    /// Going back to `from`; `attempt` counts rollback attempts (1 = the first).
    RollingBack {
        reason: String,
        attempt: u32,
        /// Set while waiting out the backoff before the next attempt.
        retry_at_ms: Option<u64>,
    },
    Finished(Outcome),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// The job runs in the new configuration.
    Applied(Deployment),
    /// The new configuration failed; the job runs in the old one again.
    RolledBack {
        deployment: Deployment,
        reason: String,
    },
    /// Nothing was changed: the old job never stopped and still runs.
    Aborted { reason: String },
    /// A first deployment that did not come up; there is no older configuration.
    NotStarted { reason: String },
}

/// One line of an operation's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub at_ms: u64,
    pub text: String,
}

/// Most history lines kept per operation (rollback retries could otherwise grow it forever).
pub const MAX_LOG: usize = 200;

/// A reconfiguration of one job, as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    /// Unique across coordinator runs and stores: job ids derive from it.
    pub id: u64,
    pub job: String,
    pub strategy: Strategy,
    /// What ran before; `None` for a first deployment.
    pub from: Option<Deployment>,
    pub to: JobConfig,
    pub started_ms: u64,
    pub phase: Phase,
    pub step: Step,
    pub step_started_ms: u64,
    /// The savepoint this operation's stop completed (Restart only).
    pub savepoint: Option<String>,
    /// Trigger of the stop-with-savepoint in flight (old job forward, new job in a rollback).
    pub trigger: Option<TriggerId>,
    /// The job the current attempt submitted or rescales.
    pub submitted: Option<JobId>,
    /// Where a rollback restores the old configuration from.
    pub restore_from: Option<String>,
    /// An in-place scale-in's TaskManagers to keep (indices), chosen once Flink placed the
    /// job's subtasks; journaled before any is stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<Vec<u32>>,
    pub log: Vec<LogEntry>,
}

impl Operation {
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished(_))
    }

    pub fn outcome(&self) -> Option<&Outcome> {
        match &self.phase {
            Phase::Finished(outcome) => Some(outcome),
            _ => None,
        }
    }

    /// The configuration the current phase brings up.
    pub fn target(&self) -> JobConfig {
        match (&self.phase, &self.from) {
            (Phase::RollingBack { .. }, Some(from)) => from.config,
            _ => self.to,
        }
    }

    /// The fixed job id of a submission: forward is attempt 0, rollback attempt n is n. Fixed
    /// ids make a resubmission after a lost answer or a crash harmless: Flink refuses a second
    /// job with the same id, and the executor finds the first by its id.
    pub fn job_id_for(&self, attempt: u32) -> JobId {
        JobId(format!("{:016x}{:016x}", self.id, u64::from(attempt)))
    }

    pub(crate) fn note(&mut self, at_ms: u64, text: impl Into<String>) {
        if self.log.len() >= MAX_LOG {
            self.log.remove(1);
        }
        self.log.push(LogEntry {
            at_ms,
            text: text.into(),
        });
    }

    /// Milliseconds each finished step took, from the history (`<step> done in N ms`).
    pub fn step_durations(&self) -> Vec<(String, u64)> {
        self.log
            .iter()
            .filter_map(|e| {
                let (step, rest) = e.text.split_once(" done in ")?;
                let ms = rest.strip_suffix(" ms")?.parse().ok()?;
                Some((step.to_string(), ms))
            })
            .collect()
    }
}

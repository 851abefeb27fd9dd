//! Policies: what a managed job should run next. Each policy is a sans-IO state machine in the
//! quinn-proto style — facts go in through `handle_*(now, …)`, actions come out of
//! [`Policy::poll_action`] — so the same code runs against the twin in virtual time and against
//! real Flink in the daemon, and tests can drive it second by second.
//!
//! Invariant: nothing here reads a clock, touches the network or draws unseeded randomness; `now`
//! is an argument (time since an arbitrary epoch, the same for every call on one policy).

pub mod baselines;
pub mod decision;
pub mod demeter;
pub mod registry;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::models::observations::Observation;
use crate::models::space::JobConfig;

pub use decision::{CandidateNumbers, Decision, ForecastSummary, Reason};

/// What the job is doing during one observation period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobPhase {
    /// Processing records in `config`.
    Running,
    /// Stopped for a reconfiguration or restarting after a failure: not processing.
    Down,
}

/// One observation period (normally one second) of the production job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct JobTick {
    pub phase: JobPhase,
    /// The configuration deployed (or being deployed while `Down`).
    pub config: JobConfig,
    /// Input rate offered to the sources, events/s (what the forecast predicts).
    pub rate: f64,
    /// Busy fraction of the bottleneck operator (busyTimeMsPerSecond / 1000), when measured.
    pub busy_fraction: Option<f64>,
    /// p95 end-to-end latency, when measured.
    pub latency_p95_ms: Option<f64>,
    /// Records waiting at the sources (Flink's `pendingRecords` or the twin's backlog).
    pub backlog: f64,
    /// CPU cores and memory (MB) actually used by the job's TaskManagers.
    pub cpu_cores: f64,
    pub memory_mb: f64,
}

impl JobTick {
    /// The tick as a model observation (no recovery measurement: production is not failed on
    /// purpose). None while the job is down or the latency was not measured.
    pub fn observation(&self) -> Option<Observation> {
        (self.phase == JobPhase::Running).then_some(())?;
        Some(Observation {
            config: self.config,
            rate: self.rate,
            busy_fraction: self.busy_fraction,
            latency_p95_ms: self.latency_p95_ms?,
            recovery_s: None,
            cpu_cores: self.cpu_cores,
            memory_mb: self.memory_mb,
        })
    }
}

/// How a change from one configuration to another is applied (design §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeKind {
    /// Only the parallelism changes: TaskManagers of the same shape are added first if
    /// needed, then the adaptive scheduler rescales in place (`PUT
    /// /jobs/<id>/resource-requirements`); after a scale-in the TaskManagers left without a
    /// subtask stop.
    InPlace,
    /// Memory, slots, CPU or checkpoint interval change: stop-with-savepoint and redeploy.
    FullRestart,
}

impl ChangeKind {
    /// The way the executor takes from `from` to `to` (`executor::plan::choose` on a cluster
    /// with room): in place when every TaskManager keeps its shape and the checkpoint interval
    /// stays (Flink cannot change either without a restart), whether TaskManagers are added
    /// or, after the rescale, the ones Flink left idle are stopped.
    pub fn between(from: &JobConfig, to: &JobConfig) -> ChangeKind {
        let same_shape = from.same_taskmanager_shape(to)
            && from.checkpoint_interval_s == to.checkpoint_interval_s;
        if same_shape {
            ChangeKind::InPlace
        } else {
            ChangeKind::FullRestart
        }
    }
}

/// What a policy asks the loop to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Move production to `to`.
    Reconfigure {
        to: JobConfig,
        kind: ChangeKind,
        decision: Decision,
    },
    /// Run profiling copies of these candidates at `rate` (one copy each, in parallel) and
    /// report their observations through [`Policy::handle_profile_results`] with `batch`.
    Profile {
        batch: u64,
        candidates: Vec<JobConfig>,
        rate: f64,
        decision: Decision,
    },
}

/// CPU cores and memory (MB): what profiling copies may take beside production, and (as
/// `profiler::plan::Resources`) what a copy books or the profiling cap allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfilingRoom {
    pub cpu_cores: f64,
    pub memory_mb: f64,
}

/// How a reconfiguration the policy asked for ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReconfigureOutcome {
    /// Running now (`to` on success, the previous configuration after a rollback).
    pub running: JobConfig,
    pub succeeded: bool,
    /// Seconds the job processed nothing.
    pub downtime_s: f64,
}

/// A policy for one managed job.
pub trait Policy {
    /// Short name used in reports (`static`, `reactive`, `demeter`, `oracle`).
    fn name(&self) -> &str;

    /// One observation period of production ended at `now`.
    fn handle_observation(&mut self, now: Duration, tick: &JobTick);

    /// A profiling batch finished; `results` holds what was measured (possibly fewer than the
    /// candidates ordered, if copies failed or production needed the resources back).
    fn handle_profile_results(&mut self, now: Duration, batch: u64, results: &[Observation]);

    /// What profiling copies could get now beside production: CPU cores and memory (MB) the
    /// cluster has to spare. Production always wins, so a batch that does not fit waits and
    /// may be dropped; a policy that knows the room orders what fits. Not called where the
    /// room is unknown. Required, so a wrapper cannot drop it by inheriting a no-op.
    fn handle_profiling_room(&mut self, now: Duration, room: ProfilingRoom);

    /// A reconfiguration this policy asked for finished (or was rolled back).
    fn handle_reconfigured(&mut self, now: Duration, outcome: &ReconfigureOutcome);

    /// The deadline from [`Policy::poll_timeout`] passed.
    fn handle_timeout(&mut self, now: Duration);

    /// When the policy wants [`Policy::handle_timeout`] called next, if at all.
    fn poll_timeout(&self) -> Option<Duration>;

    /// The next action, if any. The loop calls it until None after every `handle_*`.
    fn poll_action(&mut self) -> Option<Action>;

    /// The policy's latest rate forecast, for timelines and live views (None: it has none).
    fn forecast(&self) -> Option<ForecastSummary> {
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(text: &str) -> JobConfig {
        text.parse().unwrap()
    }

    #[test]
    fn only_parallelism_changes_are_in_place() {
        let from = config("p=12,slots=2,mem=2048m,cpu=1,ckpt=30s");
        assert_eq!(
            ChangeKind::between(&from, &config("p=11,slots=2,mem=2048m,cpu=1,ckpt=30s")),
            ChangeKind::InPlace,
            "the same six TaskManagers"
        );
        assert_eq!(
            ChangeKind::between(&from, &config("p=8,slots=2,mem=2048m,cpu=1,ckpt=30s")),
            ChangeKind::InPlace,
            "two TaskManagers fewer: the idle ones stop after the rescale"
        );
        assert_eq!(
            ChangeKind::between(&from, &config("p=16,slots=2,mem=2048m,cpu=1,ckpt=30s")),
            ChangeKind::InPlace,
            "more TaskManagers of the same shape, then an in-place rescale"
        );
        assert_eq!(
            ChangeKind::between(&from, &config("p=12,slots=3,mem=2048m,cpu=1,ckpt=30s")),
            ChangeKind::FullRestart
        );
        assert_eq!(
            ChangeKind::between(&from, &config("p=12,slots=2,mem=2048m,cpu=1,ckpt=50s")),
            ChangeKind::FullRestart
        );
    }

    #[test]
    fn a_tick_while_down_is_not_an_observation() {
        let tick = JobTick {
            phase: JobPhase::Down,
            config: JobConfig::paper_default(),
            rate: 1000.0,
            busy_fraction: Some(0.5),
            latency_p95_ms: Some(100.0),
            backlog: 0.0,
            cpu_cores: 1.0,
            memory_mb: 1000.0,
        };
        assert!(tick.observation().is_none());
        let running = JobTick {
            phase: JobPhase::Running,
            ..tick
        };
        assert_eq!(running.observation().unwrap().rate, 1000.0);
    }
}

//! One profiling copy as a sans-IO state machine: `handle_event(now, …)`, `handle_timeout(now)`
//! and `abort(now, …)` in, `poll_effect()` out, `poll_timeout()` for when to call back. Time is
//! milliseconds since the epoch, the clock Flink's checkpoint timestamps use.
//!
//! provision → wait for the TaskManagers → submit → RUNNING → warm-up → measure (readings
//! collected) → wait for the moment just before a checkpoint → kill a TaskManager → recover
//! (RUNNING again, records flowing, drained; capped) → tear down → report. Every path ends in
//! a tear-down, including failures, missed deadlines and aborts; one effect is in flight at a
//! time, and answers to an effect the machine no longer waits for are ignored.

use serde::{Deserialize, Serialize};

use super::measure::{CopySample, kill_time, measure};
use crate::executor::failure::{RecoveryPoint, RecoveryWatch};
use crate::models::observations::Observation;
use crate::models::space::JobConfig;

/// Durations (ms) and bounds of one copy's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Times {
    /// Provision → every TaskManager registered.
    pub start_deadline_ms: u64,
    /// Submission → job RUNNING at the planned parallelism.
    pub running_deadline_ms: u64,
    pub warmup_ms: u64,
    pub measure_ms: u64,
    pub sample_every_ms: u64,
    /// The kill lands this long before the next checkpoint trigger.
    pub kill_margin_ms: u64,
    /// Longest wait for a completed checkpoint to time the kill by; then it is killed anyway.
    pub checkpoint_wait_ms: u64,
    /// Recovery longer than this is reported as this (censored) and the copy torn down.
    pub max_recovery_ms: u64,
    pub teardown_deadline_ms: u64,
    /// Drained = sources back-pressured at most this (ms/s) …
    pub drained_backpressure_ms: f64,
    /// … and latency at most max(floor, factor × the measured p95) …
    pub drained_latency_floor_ms: f64,
    pub drained_latency_factor: f64,
    /// … for this many readings in a row.
    pub drained_polls: u32,
}

impl Default for Times {
    fn default() -> Self {
        Self {
            start_deadline_ms: 180_000,
            running_deadline_ms: 120_000,
            warmup_ms: 120_000,
            measure_ms: 60_000,
            sample_every_ms: 2_000,
            kill_margin_ms: 1_500,
            checkpoint_wait_ms: 60_000,
            max_recovery_ms: 180_000,
            teardown_deadline_ms: 90_000,
            drained_backpressure_ms: 100.0,
            drained_latency_floor_ms: 1_000.0,
            drained_latency_factor: 2.0,
            drained_polls: 2,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Provisioning,
    Registering,
    Submitting,
    Starting,
    WarmingUp,
    Measuring,
    AwaitingCheckpoint,
    Killing,
    Recovering,
    TearingDown,
    Done,
}

/// What the shell must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Create the copy's directories and config, start its JobManager and TaskManagers.
    Provision,
    /// Read the cluster overview: answer [`Event::Cluster`].
    CheckCluster,
    /// Upload the jar and run the job with the profiling arguments: answer [`Event::Submitted`].
    Submit,
    /// Read the job and the TaskManagers' usage: answer [`Event::Sample`].
    Sample,
    /// SIGKILL this TaskManager and start its replacement: answer [`Event::Killed`].
    Kill { victim: String },
    /// Stop every process of the copy, wait for its ports, remove its directory; first move its
    /// logs aside when `keep_logs` (the copy failed without a measurement: the operator needs
    /// them, and the error names them).
    TearDown { keep_logs: bool },
}

/// Answers of the shell.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Provisioned,
    Cluster {
        taskmanagers: u32,
        slots: u32,
    },
    Submitted,
    Sample(Box<CopySample>),
    /// The kill happened at `at_ms` (wall clock).
    Killed {
        at_ms: u64,
    },
    TornDown,
    /// A process the copy needs (its JobManager, one of its TaskManagers) exited before the job
    /// ran: no wait can bring it back, so the copy fails now instead of at its deadline.
    Exited {
        what: String,
    },
    /// The effect in flight failed.
    Failed {
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CopyOutcome {
    /// Measured; `recovery_s` is set when the failure injection worked.
    Measured(Observation),
    Failed(String),
    /// Torn down early because production needed the resources (or the caller stopped).
    Aborted(String),
}

/// Recovery after the injected failure, ms after the kill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoveryTimes {
    pub running_ms: u64,
    pub flowing_ms: u64,
    pub drained_ms: u64,
    /// Not recovered within [`Times::max_recovery_ms`]: `drained_ms` is that cap.
    pub censored: bool,
    /// How long before the next checkpoint trigger the kill landed (None: no checkpoint seen).
    pub before_checkpoint_ms: Option<u64>,
}

/// Everything a finished copy reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyReport {
    pub name: String,
    pub config: JobConfig,
    pub rate: f64,
    pub outcome: CopyOutcome,
    /// Provision → job RUNNING at the planned parallelism.
    pub startup_ms: Option<u64>,
    pub recovery: Option<RecoveryTimes>,
    /// Set when the tear-down reported a problem (something may be left behind).
    pub teardown_error: Option<String>,
    pub started_ms: u64,
    pub finished_ms: u64,
}

#[derive(Debug, Clone)]
pub struct CopyMachine {
    name: String,
    config: JobConfig,
    rate: f64,
    taskmanagers: u32,
    victim: String,
    times: Times,
    phase: Phase,
    started: u64,
    phase_since: u64,
    deadline: Option<u64>,
    pending: Option<Effect>,
    queued: Option<Effect>,
    next_sample: Option<u64>,
    running_at: Option<u64>,
    window: Vec<(u64, CopySample)>,
    last_sample: Option<CopySample>,
    measured: Option<Observation>,
    kill_at: Option<u64>,
    watch: Option<RecoveryWatch>,
    recovery: Option<RecoveryTimes>,
    outcome: Option<CopyOutcome>,
    teardown_error: Option<String>,
    finished: Option<u64>,
}

#[path = "transitions.rs"]
mod transitions;

impl CopyMachine {
    /// A copy of `config` fed `rate` records/s on `taskmanagers` TaskManagers (the first,
    /// `victim`, is the one killed). Starts by provisioning.
    pub fn new(
        now: u64,
        name: &str,
        config: JobConfig,
        rate: f64,
        victim: &str,
        times: Times,
    ) -> Self {
        let mut m = Self {
            name: name.to_string(),
            config,
            rate,
            taskmanagers: config.task_managers(),
            victim: victim.to_string(),
            times,
            phase: Phase::Provisioning,
            started: now,
            phase_since: now,
            deadline: None,
            pending: None,
            queued: None,
            next_sample: None,
            running_at: None,
            window: Vec::new(),
            last_sample: None,
            measured: None,
            kill_at: None,
            watch: None,
            recovery: None,
            outcome: None,
            teardown_error: None,
            finished: None,
        };
        m.enter(now, Phase::Provisioning);
        m
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The next effect to carry out; `None` while one is in flight or nothing is due.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        if self.pending.is_some() {
            return None;
        }
        let effect = self.queued.take()?;
        self.pending = Some(effect.clone());
        Some(effect)
    }

    /// When [`CopyMachine::handle_timeout`] should be called next.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.phase == Phase::Done {
            return None;
        }
        if self.pending.is_some() {
            return self.deadline;
        }
        let kill = self
            .kill_at
            .filter(|_| self.phase == Phase::AwaitingCheckpoint);
        [self.deadline, self.next_sample, kill]
            .into_iter()
            .flatten()
            .min()
    }

    /// Production needs the resources (or the caller stops): tear down now.
    pub fn abort(&mut self, now: u64, reason: &str) {
        if matches!(self.phase, Phase::TearingDown | Phase::Done) {
            return;
        }
        self.outcome = Some(CopyOutcome::Aborted(reason.to_string()));
        self.enter(now, Phase::TearingDown);
    }

    /// Whether the copy failed without a measurement (its tear-down keeps its logs).
    pub(super) fn has_failed(&self) -> bool {
        matches!(self.outcome, Some(CopyOutcome::Failed(_)))
    }

    /// The report, once [`Phase::Done`].
    pub fn report(&self) -> Option<CopyReport> {
        let finished = self.finished?;
        Some(CopyReport {
            name: self.name.clone(),
            config: self.config,
            rate: self.rate,
            outcome: self
                .outcome
                .clone()
                .unwrap_or_else(|| CopyOutcome::Failed("ended without an outcome".into())),
            startup_ms: self.running_at.map(|t| t.saturating_sub(self.started)),
            recovery: self.recovery.clone(),
            teardown_error: self.teardown_error.clone(),
            started_ms: self.started,
            finished_ms: finished,
        })
    }

    fn measurement_done(&mut self) {
        self.measured = measure(self.config, self.rate, &self.window);
    }

    fn recovery_point(&self, now: u64, s: &CopySample) -> RecoveryPoint {
        let bound = self
            .measured
            .map_or(self.times.drained_latency_floor_ms, |m| {
                (m.latency_p95_ms * self.times.drained_latency_factor)
                    .max(self.times.drained_latency_floor_ms)
            });
        let drained = s
            .source_backpressure_ms
            .is_some_and(|bp| bp <= self.times.drained_backpressure_ms)
            && s.latency_p95_ms
                .is_some_and(|l| l.is_finite() && l <= bound);
        RecoveryPoint {
            at_ms: now,
            fully_running: s.fully_running,
            parallelism: s.parallelism.clone(),
            restarts: s.restarts,
            source_records: s.source_records,
            drained,
        }
    }

    fn schedule_kill(&mut self, now: u64, s: &CopySample) {
        if self.kill_at.is_none()
            && let Some(at) = s
                .checkpoint
                .as_ref()
                .and_then(|c| kill_time(now, c, self.times.kill_margin_ms))
        {
            self.kill_at = Some(at);
        }
    }

    fn planned_shape(&self, s: &CopySample) -> bool {
        s.fully_running && s.parallelism.iter().copied().max() == Some(self.config.parallelism)
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;

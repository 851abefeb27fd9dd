//! The reconfiguration state machine, sans-IO in the quinn-proto style: the driver feeds
//! [`Machine::handle_event`] and [`Machine::handle_timeout`] with the current time and carries
//! out what [`Machine::poll_effect`] returns. No clock, no I/O, no randomness in here.
//!
//! Safety rules it keeps (the tests in `machine_tests.rs` check each):
//! - a running job is only ever stopped by a stop-with-savepoint; a job is cancelled only when
//!   it is the one this operation submitted and cannot take a savepoint (not RUNNING);
//! - a submission restores from the savepoint this operation took, or, in a rollback, from the
//!   newest completed snapshot of the job this operation submitted (which descends from that
//!   savepoint: restoring the older one would replay output its checkpoints already committed);
//! - every step is journaled ([`Effect::Journal`]) before its first action;
//! - a failed rollback is retried with backoff and an alert, never given up: a job must not
//!   stay stopped.

use std::collections::VecDeque;

mod events;
#[cfg(test)]
mod recover_tests;
#[cfg(test)]
mod scale_in_tests;
#[cfg(test)]
mod scale_out_tests;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;
mod transitions;

use super::effects::Effect;
use super::operation::{Deployment, Operation, Phase, Step};
use super::plan::{Strategy, adds_taskmanagers, releases_taskmanagers, scale_out_indices};
use crate::models::space::JobConfig;

/// Deadlines and pacing, in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub poll_ms: u64,
    pub stop_ms: u64,
    /// How long the old job must run on with no snapshot in progress before an unclear stop
    /// counts as not having happened (longer than a REST request timeout, so a request still
    /// on its way cannot stop the job after we gave up on it).
    pub resolve_quiet_ms: u64,
    /// After this an unresolved stop raises an alert (and is still watched).
    pub resolve_ms: u64,
    pub taskmanagers_ms: u64,
    pub wait_taskmanagers_ms: u64,
    /// How long to look for a job whose submission answer was lost.
    pub submit_confirm_ms: u64,
    pub wait_running_ms: u64,
    pub rescale_ms: u64,
    /// Finding an in-place scale-in's idle TaskManagers and stopping them; past it they keep
    /// running (an alert says so) and the change stands.
    pub release_ms: u64,
    pub stop_new_ms: u64,
    pub cancel_ms: u64,
    pub rollback_backoff_ms: u64,
    pub rollback_backoff_max_ms: u64,
    /// Also require the sources to emit records before a job counts as up.
    pub require_records: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            poll_ms: 500,
            stop_ms: 60_000,
            resolve_quiet_ms: 15_000,
            resolve_ms: 120_000,
            taskmanagers_ms: 60_000,
            wait_taskmanagers_ms: 90_000,
            submit_confirm_ms: 20_000,
            // In place, Flink first waits out its rescale cooldown (30 s after the last change).
            wait_running_ms: 120_000,
            rescale_ms: 30_000,
            release_ms: 60_000,
            stop_new_ms: 30_000,
            cancel_ms: 60_000,
            rollback_backoff_ms: 5_000,
            rollback_backoff_max_ms: 120_000,
            require_records: true,
        }
    }
}

impl Limits {
    fn of(&self, step: Step) -> u64 {
        match step {
            Step::Stop => self.stop_ms,
            Step::ResolveStop => self.resolve_ms,
            Step::TaskManagers => self.taskmanagers_ms,
            Step::WaitTaskManagers => self.wait_taskmanagers_ms,
            Step::Submit => self.submit_confirm_ms,
            Step::WaitRunning => self.wait_running_ms,
            Step::Rescale => self.rescale_ms,
            Step::Release => self.release_ms,
            Step::StopNew => self.stop_new_ms,
            Step::CancelNew | Step::RestorePoint => self.cancel_ms,
            Step::Done => u64::MAX,
        }
    }

    /// Backoff before rollback attempt `attempt + 1`.
    pub fn backoff(&self, attempt: u32) -> u64 {
        let doublings = attempt.saturating_sub(1).min(20);
        self.rollback_backoff_ms
            .saturating_mul(1 << doublings)
            .min(self.rollback_backoff_max_ms)
    }
}

/// Per-step state that is not journaled: after a crash the step starts over from its record.
#[derive(Debug, Clone, PartialEq)]
enum Sub {
    None,
    /// Submit: look for the job (after a lost answer until `until`; after a resume once).
    SubmitCheck {
        until: Option<u64>,
    },
    /// WaitRunning: records the sources had emitted when the job first ran at the target.
    Baseline(Option<f64>),
    /// ResolveStop: since when the old job runs with no snapshot in progress.
    Quiet(Option<u64>),
    CancelSent,
}

#[derive(Debug)]
pub struct Machine {
    op: Operation,
    limits: Limits,
    /// Flink cluster name the job's TaskManagers join (for their specs).
    cluster: String,
    queue: VecDeque<Effect>,
    awaiting: bool,
    wake_at: Option<u64>,
    deadline: u64,
    sub: Sub,
    /// Stops re-triggered after Flink declined the savepoint with the job running on.
    stop_retries: u32,
}

impl Machine {
    /// Starts a new operation taking `from` (if the job runs) to `to`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        id: u64,
        job: &str,
        cluster: &str,
        strategy: Strategy,
        from: Option<Deployment>,
        to: JobConfig,
        now: u64,
        limits: Limits,
    ) -> Self {
        let mut m = Self::opened(id, job, cluster, strategy, from, to, now, limits);
        match strategy {
            Strategy::InPlace => {
                m.op.submitted = m.op.from.as_ref().map(|d| d.job_id.clone());
                let first = if m.adds_taskmanagers() {
                    Step::TaskManagers
                } else {
                    Step::Rescale
                };
                m.enter(now, first, None);
            }
            Strategy::Restart if m.op.from.is_some() => m.enter(now, Step::Stop, None),
            Strategy::Recover => m.begin_recovery(now, "recovering the stopped job".into()),
            _ => m.enter(now, Step::TaskManagers, None),
        }
        m
    }

    /// Brings `current` back after it stopped running outside any operation (the watchdog):
    /// the current job is stopped with a savepoint if it runs again meanwhile, cancelled if it
    /// hangs between states, and resubmitted from its newest completed snapshot.
    pub fn recover(
        id: u64,
        job: &str,
        cluster: &str,
        current: Deployment,
        reason: &str,
        now: u64,
        limits: Limits,
    ) -> Self {
        let to = current.config;
        let mut m = Self::opened(
            id,
            job,
            cluster,
            Strategy::Recover,
            Some(current),
            to,
            now,
            limits,
        );
        m.begin_recovery(now, reason.to_string());
        m
    }

    /// The job to recover is the current one: its newest snapshot is the restore point, and
    /// stopping or cancelling it (if it still half runs) comes first — the rollback path.
    fn begin_recovery(&mut self, now: u64, reason: String) {
        self.op.submitted = self.op.from.as_ref().map(|d| d.job_id.clone());
        self.start_rollback(now, reason, 1);
    }

    #[allow(clippy::too_many_arguments)]
    fn opened(
        id: u64,
        job: &str,
        cluster: &str,
        strategy: Strategy,
        from: Option<Deployment>,
        to: JobConfig,
        now: u64,
        limits: Limits,
    ) -> Self {
        let op = Operation {
            id,
            job: job.to_string(),
            strategy,
            from,
            to,
            started_ms: now,
            phase: Phase::Forward,
            step: Step::Done,
            step_started_ms: now,
            savepoint: None,
            trigger: None,
            submitted: None,
            restore_from: None,
            kept: None,
            log: Vec::new(),
        };
        let mut m = Self::with(op, cluster, limits);
        let from = m.op.from.as_ref().map(|d| d.config.to_string());
        m.op.note(
            now,
            format!(
                "{:?} {} → {}",
                strategy,
                from.as_deref().unwrap_or("(not running)"),
                to
            ),
        );
        m
    }

    /// Continues a journaled operation after a coordinator restart.
    pub fn resume(op: Operation, cluster: &str, now: u64, limits: Limits) -> Self {
        let mut m = Self::with(op, cluster, limits);
        if m.op.is_finished() {
            return m;
        }
        if let Phase::RollingBack {
            retry_at_ms: Some(at),
            ..
        } = m.op.phase
        {
            m.wake_at = Some(at);
            return m;
        }
        let step = m.op.step;
        m.op.note(now, format!("resumed at {}", step.name()));
        match step {
            // Whether the stop request reached Flink is unknown without its trigger: never
            // send a second one, find out from the job instead.
            Step::Stop if m.op.trigger.is_none() => m.enter(now, Step::ResolveStop, None),
            Step::Submit => {
                // The job id is fixed: look for the job before submitting again.
                m.begin(now, Step::Submit, None);
                m.sub = Sub::SubmitCheck { until: None };
                m.act();
            }
            other => m.enter(now, other, None),
        }
        m
    }

    /// An in-place change for which `test(from, to)` holds.
    fn in_place_and(&self, test: fn(&JobConfig, &JobConfig) -> bool) -> bool {
        self.op.strategy == Strategy::InPlace
            && self
                .op
                .from
                .as_ref()
                .is_some_and(|d| test(&d.config, &self.op.to))
    }

    /// An in-place scale-out that starts TaskManagers before it rescales.
    fn adds_taskmanagers(&self) -> bool {
        self.in_place_and(adds_taskmanagers)
    }

    /// An in-place scale-in that stops TaskManagers after it rescales.
    fn releases_taskmanagers(&self) -> bool {
        self.in_place_and(releases_taskmanagers)
    }

    /// Indices of the TaskManagers the current phase brings up (or keeps): the old ones in a
    /// rollback; in place, the ones the job has, plus new ones for a scale-out or minus the
    /// released ones after a scale-in; otherwise the target's `0..n`.
    fn target_indices(&self) -> Vec<u32> {
        let from = self.op.from.as_ref().map(Deployment::taskmanager_indices);
        match (&self.op.phase, from) {
            (Phase::RollingBack { .. }, Some(from)) => from,
            (_, Some(from)) if self.op.strategy == Strategy::InPlace => match &self.op.kept {
                Some(kept) => kept.clone(),
                None if self.releases_taskmanagers() => from,
                None => scale_out_indices(&from, self.op.to.task_managers()),
            },
            _ => (0..self.op.target().task_managers()).collect(),
        }
    }

    fn with(op: Operation, cluster: &str, limits: Limits) -> Self {
        Self {
            op,
            limits,
            cluster: cluster.to_string(),
            queue: VecDeque::new(),
            awaiting: false,
            wake_at: None,
            deadline: u64::MAX,
            sub: Sub::None,
            stop_retries: 0,
        }
    }

    pub fn operation(&self) -> &Operation {
        &self.op
    }

    pub fn is_finished(&self) -> bool {
        self.op.is_finished() && self.queue.is_empty()
    }

    /// The next thing to do, if any. Every effect except `Journal` and `Alert` must be
    /// answered with one [`Self::handle_event`] before the machine asks for more.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.queue.pop_front()
    }

    /// When [`Self::handle_timeout`] wants to be called, if nothing else happens first.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.awaiting || !self.queue.is_empty() {
            return None;
        }
        self.wake_at
    }

    pub fn handle_timeout(&mut self, now: u64) {
        if self.awaiting || self.op.is_finished() {
            return;
        }
        let Some(at) = self.wake_at else { return };
        if now < at {
            return;
        }
        self.wake_at = None;
        if let Phase::RollingBack {
            reason,
            attempt,
            retry_at_ms: Some(_),
        } = &self.op.phase
        {
            let (reason, attempt) = (reason.clone(), *attempt);
            self.start_rollback(now, reason, attempt + 1);
            return;
        }
        if now >= self.deadline {
            self.on_deadline(now);
        } else {
            self.act();
        }
    }
}

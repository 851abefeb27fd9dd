//! A simulated Flink cluster and TaskManager backend that answers the machine's effects,
//! with switches to inject failures, and checks the safety rules on every effect.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use super::super::effects::{
    Effect, Event, Fault, JobView, RegisteredTm, SavepointProgress, StopView, TaskManagersView,
};
use super::super::operation::{Deployment, Operation};
use super::super::plan::{Strategy, taskmanager_specs_at};
use super::{Limits, Machine};
use crate::flink::{JobId, JobState, TriggerId};
use crate::models::space::JobConfig;

pub fn cfg(text: &str) -> JobConfig {
    text.parse().unwrap()
}

#[derive(Debug, Clone)]
pub struct SimJob {
    pub state: JobState,
    pub parallelism: u32,
    pub records: f64,
    pub restored_from: Option<String>,
    /// Completed snapshots, oldest first.
    pub snapshots: Vec<String>,
    /// The TaskManager of each subtask while it runs.
    pub subtasks_on: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Sim {
    pub now: u64,
    pub from: Option<JobConfig>,
    pub first_job: JobId,
    pub jobs: BTreeMap<JobId, SimJob>,
    pub tms: Vec<RegisteredTm>,
    pub dead: Vec<String>,
    pub triggers: BTreeMap<TriggerId, String>,
    snapshot_counter: u32,
    pub newest_snapshot: Option<String>,
    pub journal: Vec<Operation>,
    pub alerts: Vec<String>,
    pub violations: Vec<String>,
    pub effects_done: usize,
    pub crash_after: Option<(usize, bool)>,
    stop_at: u64,
    // Failure switches. Job faults apply to the forward submission (attempt 0) only.
    pub fail_ensure_for_mb: Option<u32>,
    pub die_at_mb: Option<u32>,
    pub unregistered_mb: Option<u32>,
    /// TaskManagers (by id) that exit as soon as they are started.
    pub dies: Vec<String>,
    pub refuse_submit: bool,
    pub refuse_submit_until_attempt: u64,
    pub stuck_parallelism: Option<u32>,
    pub stuck_only_for: Option<u32>,
    pub fail_new_jobs: bool,
    pub checkpoint_new_jobs: bool,
    pub new_jobs_restart: bool,
    pub lose_stop_answer: bool,
    pub refuse_stop: bool,
    pub savepoint_fails: bool,
    /// Savepoints declined before one succeeds (a task not running yet after a rescale).
    pub savepoints_declined: u32,
    pub savepoint_never_completes: bool,
    pub lose_submit_answer: bool,
    pub fail_rescale_to: Option<u32>,
    /// The running job's TaskManagers (indices) when not `0..n`.
    pub from_tms: Option<Vec<u32>>,
    /// Where the job's subtasks run cannot be read.
    pub placement_fails: bool,
}

impl Sim {
    pub fn empty() -> Self {
        Self {
            now: 1_000_000,
            refuse_submit_until_attempt: 1,
            ..Self::default()
        }
    }

    pub fn running(from: &str) -> Self {
        let mut sim = Self::empty();
        let config = cfg(from);
        sim.from = Some(config);
        sim.first_job = JobId::from("first");
        sim.jobs.insert(
            sim.first_job.clone(),
            SimJob {
                state: JobState::Running,
                parallelism: config.parallelism,
                records: 0.0,
                restored_from: None,
                snapshots: vec![],
                subtasks_on: vec![],
            },
        );
        let indices: Vec<u32> = (0..config.task_managers()).collect();
        sim.set_tms(&config, &indices);
        sim.place_first_job();
        sim
    }

    fn place_first_job(&mut self) {
        let first = self.first_job.clone();
        let p = self.jobs[&first].parallelism;
        let placed = self.place(&[], p);
        if let Some(j) = self.jobs.get_mut(&first) {
            j.subtasks_on = placed;
        }
    }

    /// [`Self::running`] on the TaskManagers `indices` (what an earlier scale-in kept).
    pub fn running_on(from: &str, indices: &[u32]) -> Self {
        let mut sim = Self::running(from);
        sim.from_tms = Some(indices.to_vec());
        sim.set_tms(&cfg(from), indices);
        sim.place_first_job();
        sim
    }

    pub fn start_with(from: &str) -> Self {
        if from.is_empty() {
            Self::empty()
        } else {
            Self::running(from)
        }
    }

    fn set_tms(&mut self, config: &JobConfig, indices: &[u32]) {
        self.tms = taskmanager_specs_at("bench", "c", config, indices)
            .into_iter()
            .map(|s| RegisteredTm {
                id: s.id,
                slots: s.slots,
                memory_mb: s.process_memory_mb,
            })
            .collect();
    }

    pub fn machine(&mut self, strategy: Strategy, to: &str) -> Machine {
        let from = self.from.map(|config| Deployment {
            config,
            job_id: self.first_job.clone(),
            taskmanagers: self.from_tms.clone(),
        });
        Machine::start(
            7,
            "bench",
            "c",
            strategy,
            from,
            cfg(to),
            self.now,
            Limits::default(),
        )
    }

    pub fn running_jobs(&self) -> Vec<&JobId> {
        self.jobs
            .iter()
            .filter(|(_, j)| j.state == JobState::Running)
            .map(|(id, _)| id)
            .collect()
    }

    /// The TaskManagers the running job's subtasks are on (each once).
    pub fn placement(&self) -> Vec<String> {
        let mut busy: Vec<String> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .flat_map(|j| j.subtasks_on.iter().cloned())
            .collect();
        busy.sort();
        busy.dedup();
        busy
    }

    /// Places `p` subtasks the way this simulated Flink does: it keeps the ones `current` has
    /// on the highest-numbered TaskManagers and fills free slots from the lowest one, so a
    /// scale-in leaves the job on TaskManagers other than `0..n`. Flink picks, not Demeter.
    fn place(&self, current: &[String], p: u32) -> Vec<String> {
        let mut kept: Vec<String> = current.to_vec();
        kept.sort_by_key(|id| std::cmp::Reverse(Self::index(id)));
        kept.truncate(p as usize);
        let mut tms = self.tms.clone();
        tms.sort_by_key(|t| Self::index(&t.id));
        for t in &tms {
            while (kept.len() as u64) < u64::from(p)
                && (kept.iter().filter(|id| **id == t.id).count() as u32) < t.slots
            {
                kept.push(t.id.clone());
            }
        }
        kept
    }

    fn index(id: &str) -> u32 {
        id.rsplit_once("-tm")
            .and_then(|(_, i)| i.parse().ok())
            .unwrap_or(0)
    }

    pub fn assert_invariants(&self) {
        assert!(self.violations.is_empty(), "{:#?}", self.violations);
    }

    /// Runs an operation to its end (through one crash and resume if `crash_after` is set).
    pub fn run(&mut self, strategy: Strategy, to: &str) -> Operation {
        let mut m = self.machine(strategy, to);
        for _ in 0..100_000 {
            if let Some(effect) = m.poll_effect() {
                self.now += 50;
                if effect.is_fire_and_forget() {
                    self.record(effect);
                    continue;
                }
                match self.journal.last() {
                    Some(j) if j.step == m.operation().step => {}
                    _ => self
                        .violations
                        .push(format!("{effect:?} before its step was journaled")),
                }
                let event = self.answer(&effect);
                self.effects_done += 1;
                match self.crash_after {
                    Some((n, lost)) if n == self.effects_done => {
                        self.crash_after = None;
                        if !lost {
                            m.handle_event(self.now, event);
                        }
                        let last = self.journal.last().cloned().expect("journaled");
                        m = Machine::resume(last, "c", self.now, Limits::default());
                    }
                    _ => m.handle_event(self.now, event),
                }
                continue;
            }
            if m.is_finished() {
                return m.operation().clone();
            }
            let at = m.poll_timeout().expect("a waiting machine has a timeout");
            self.now = self.now.max(at);
            m.handle_timeout(self.now);
        }
        panic!("no end: {:#?}", m.operation().log);
    }

    fn record(&mut self, effect: Effect) {
        match effect {
            Effect::Journal { op, .. } => self.journal.push(*op),
            Effect::Alert { message } => self.alerts.push(message),
            _ => unreachable!(),
        }
    }

    /// The first job took a completed checkpoint (what a recovery restores from).
    pub fn checkpoint_first_job(&mut self) -> String {
        let name = self.snapshot("chk");
        let first = self.first_job.clone();
        if let Some(j) = self.jobs.get_mut(&first) {
            j.snapshots.push(name.clone());
        }
        name
    }

    fn snapshot(&mut self, kind: &str) -> String {
        self.snapshot_counter += 1;
        let name = format!("{kind}-{}", self.snapshot_counter);
        self.newest_snapshot = Some(name.clone());
        name
    }

    fn attempt(job: &JobId) -> u64 {
        u64::from_str_radix(&job.as_str()[16.min(job.as_str().len())..], 16).unwrap_or(0)
    }

    fn answer(&mut self, effect: &Effect) -> Event {
        match effect.clone() {
            Effect::TriggerStop { job } => self.trigger_stop(job),
            Effect::PollSavepoint { trigger, .. } => {
                Event::Savepoint(Ok(match self.triggers.get(&trigger) {
                    Some(location) if location == "failed" => SavepointProgress::Failed {
                        message: "declined".into(),
                    },
                    Some(location) => SavepointProgress::Completed {
                        location: location.clone(),
                    },
                    None => SavepointProgress::InProgress,
                }))
            }
            Effect::InspectStop { job, .. } => {
                let j = self.jobs.get(&job);
                Event::StopInspected(Ok(StopView {
                    state: j.map(|j| j.state),
                    savepoint: j
                        .filter(|j| j.state == JobState::Finished)
                        .and_then(|j| j.snapshots.last().cloned()),
                    // Flink's checkpoint timeout ends a stuck savepoint eventually.
                    snapshot_in_progress: self.savepoint_never_completes
                        && self.now < self.stop_at + 90_000,
                }))
            }
            Effect::EnsureTaskManagers { specs, .. } => {
                if specs
                    .iter()
                    .any(|s| Some(s.process_memory_mb) == self.fail_ensure_for_mb)
                {
                    return Event::TaskManagersEnsured(Err(Fault::new("agent refused")));
                }
                // Adding TaskManagers beside a running job is fine (an in-place scale-out), and
                // so is stopping one that holds none of its subtasks (after a scale-in);
                // restarting or stopping one it runs on is not.
                let busy = self.placement();
                let disturbs = self.tms.iter().filter(|t| busy.contains(&t.id)).any(|t| {
                    !specs.iter().any(|s| {
                        t.id == s.id && t.memory_mb == s.process_memory_mb && t.slots == s.slots
                    })
                });
                if disturbs {
                    self.violations
                        .push("TaskManagers restarted or stopped under a running job".into());
                }
                self.tms.clear();
                self.dead.clear();
                for s in specs {
                    if Some(s.process_memory_mb) == self.die_at_mb || self.dies.contains(&s.id) {
                        self.dead.push(s.id);
                    } else if Some(s.process_memory_mb) != self.unregistered_mb {
                        self.tms.push(RegisteredTm {
                            id: s.id,
                            slots: s.slots,
                            memory_mb: s.process_memory_mb,
                        });
                    }
                }
                Event::TaskManagersEnsured(Ok(()))
            }
            Effect::QueryTaskManagers { .. } => Event::TaskManagers(Ok(TaskManagersView {
                registered: self.tms.clone(),
                dead: self.dead.clone(),
            })),
            Effect::Submit {
                job_id,
                config,
                restore,
            } => self.submit(job_id, config, restore),
            Effect::QueryJob { job } => Event::Job(Ok(self.jobs.get_mut(&job).map(|j| {
                if j.state == JobState::Running {
                    j.records += 100.0;
                }
                JobView {
                    state: j.state,
                    all_running: j.state == JobState::Running,
                    vertices: vec![(j.parallelism, Some(128)); 2],
                    source_records: Some(j.records),
                }
            }))),
            Effect::Rescale { job, parallelism } => {
                if self.fail_rescale_to == Some(parallelism) {
                    return Event::Rescaled(Err(Fault::new("HTTP 500")));
                }
                let stuck = self
                    .stuck_parallelism
                    .filter(|_| self.stuck_only_for == Some(parallelism));
                let slots: u32 = self.tms.iter().map(|t| t.slots).sum();
                if parallelism > slots {
                    self.violations.push(format!(
                        "rescaled {job} to {parallelism} with {slots} slots registered"
                    ));
                }
                let p = stuck.unwrap_or(parallelism);
                let placed = self.place(&self.jobs[&job].subtasks_on, p);
                let j = self.jobs.get_mut(&job).unwrap();
                j.parallelism = p;
                j.subtasks_on = placed;
                Event::Rescaled(Ok(()))
            }
            Effect::QueryPlacement { job } => Event::Placement(match self.jobs.get(&job) {
                _ if self.placement_fails => Err(Fault::new("HTTP 500")),
                Some(j) if j.state == JobState::Running => Ok(self.placement()),
                _ => Err(Fault::new("job not running")),
            }),
            Effect::Cancel { job } => {
                match self.jobs.get_mut(&job) {
                    Some(j) if j.state == JobState::Running => {
                        self.violations.push(format!("cancelled running job {job}"))
                    }
                    Some(j) if !j.state.is_terminal() => j.state = JobState::Canceled,
                    _ => return Event::Cancelled(Err(Fault::new("not found or ended"))),
                }
                Event::Cancelled(Ok(()))
            }
            Effect::ReadRestorePoint { job } => Event::RestorePoint(Ok(self
                .jobs
                .get(&job)
                .and_then(|j| j.snapshots.last().cloned()))),
            Effect::Journal { .. } | Effect::Alert { .. } => unreachable!(),
        }
    }

    fn trigger_stop(&mut self, job: JobId) -> Event {
        let forward = job == self.first_job;
        if forward && self.refuse_stop {
            return Event::StopTriggered(Err(Fault::new("HTTP 503")));
        }
        if !self
            .jobs
            .get(&job)
            .is_some_and(|j| j.state == JobState::Running)
        {
            return Event::StopTriggered(Err(Fault::new("job not running")));
        }
        self.stop_at = self.now;
        let trigger = TriggerId(format!("t{}", self.triggers.len()));
        let declined = forward && self.savepoints_declined > 0;
        self.savepoints_declined = self.savepoints_declined.saturating_sub(1);
        if forward && (self.savepoint_fails || declined) {
            self.triggers.insert(trigger.clone(), "failed".into());
        } else if !(forward && self.savepoint_never_completes) {
            let location = self.snapshot("sp");
            let j = self.jobs.get_mut(&job).unwrap();
            j.state = JobState::Finished;
            j.snapshots.push(location.clone());
            self.triggers.insert(trigger.clone(), location);
        }
        if forward && std::mem::take(&mut self.lose_stop_answer) {
            return Event::StopTriggered(Err(Fault::new("connection reset")));
        }
        Event::StopTriggered(Ok(trigger))
    }

    fn submit(&mut self, job_id: JobId, config: JobConfig, restore: Option<String>) -> Event {
        if self.jobs.contains_key(&job_id) {
            return Event::Submitted(Err(Fault::new("duplicate job id")));
        }
        let attempt = Self::attempt(&job_id);
        if self.refuse_submit && attempt < self.refuse_submit_until_attempt {
            return Event::Submitted(Err(Fault::new("HTTP 400")));
        }
        if !self.running_jobs().is_empty() {
            self.violations
                .push(format!("{job_id} submitted beside a running job"));
        }
        if restore != self.newest_snapshot {
            self.violations.push(format!(
                "{job_id} restores {restore:?}, newest snapshot is {:?}",
                self.newest_snapshot
            ));
        }
        let forward = attempt == 0;
        let stuck = self
            .stuck_parallelism
            .filter(|_| forward && self.stuck_only_for.is_none_or(|p| p == config.parallelism));
        let state = match () {
            _ if forward && self.fail_new_jobs => JobState::Failed,
            _ if forward && self.new_jobs_restart => JobState::Restarting,
            _ => JobState::Running,
        };
        let parallelism = stuck.unwrap_or(config.parallelism);
        let subtasks_on = if state == JobState::Running {
            self.place(&[], parallelism)
        } else {
            vec![]
        };
        let mut job = SimJob {
            state,
            parallelism,
            records: 0.0,
            restored_from: restore,
            snapshots: vec![],
            subtasks_on,
        };
        if forward && self.checkpoint_new_jobs {
            job.snapshots.push(self.snapshot("chk"));
        }
        self.jobs.insert(job_id, job);
        if forward && std::mem::take(&mut self.lose_submit_answer) {
            return Event::Submitted(Err(Fault::new("timed out")));
        }
        Event::Submitted(Ok(()))
    }
}

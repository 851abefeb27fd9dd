//! The supervisor's sans-IO core: what the coordinator wants running versus what runs, moved
//! only by events that carry the time. It never touches a process; it answers each event with
//! the [`Action`]s the backend must take, and the shell feeds the outcomes back.

use std::collections::BTreeMap;

use demeter_common::protocol::{TaskManagerSpec, TaskManagerState, TaskManagerStatus};

/// What the backend must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start a process for this spec; answer with [`Table::spawned`] or [`Table::spawn_failed`].
    Spawn(TaskManagerSpec),
    /// Ask the running process to end (SIGTERM, `systemctl stop`).
    Terminate { id: String },
    /// End it now (SIGKILL).
    Kill { id: String },
}

/// How a process ended, as the OS reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// systemd's `Result=` of the unit (`success`, `signal`, `exit-code`, …).
    UnitResult(String),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exited with status {c}"),
            Exit::Signal(9) => f.write_str("killed by signal 9 (SIGKILL)"),
            Exit::Signal(15) => f.write_str("killed by signal 15 (SIGTERM)"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
            Exit::UnitResult(r) => write!(f, "ended with unit result {r}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    spec: TaskManagerSpec,
    state: TaskManagerState,
    pid: Option<u32>,
    started_at_ms: Option<u64>,
    /// When a stop escalates to SIGKILL; `None` once escalated or when not stopping.
    kill_at_ms: Option<u64>,
    /// A restart waits for the old process to end, then starts this spec.
    restart_with: Option<TaskManagerSpec>,
    /// The coordinator asked for SIGKILL: the exit is reported as a failure it caused.
    kill_ordered: bool,
}

impl Entry {
    fn new(spec: TaskManagerSpec) -> Self {
        Self {
            spec,
            state: TaskManagerState::Starting,
            pid: None,
            started_at_ms: None,
            kill_at_ms: None,
            restart_with: None,
            kill_ordered: false,
        }
    }

    fn is_live(&self) -> bool {
        matches!(
            self.state,
            TaskManagerState::Starting | TaskManagerState::Running | TaskManagerState::Stopping
        )
    }

    fn begin_stop(&mut self, now_ms: u64, grace_ms: u64) -> Vec<Action> {
        self.state = TaskManagerState::Stopping;
        self.kill_at_ms = Some(now_ms.saturating_add(grace_ms));
        vec![Action::Terminate {
            id: self.spec.id.clone(),
        }]
    }

    fn begin_start(&mut self, spec: TaskManagerSpec) -> Vec<Action> {
        *self = Entry::new(spec.clone());
        vec![Action::Spawn(spec)]
    }
}

/// Refusals; the text goes back to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no TaskManager {0} on this agent")]
    Unknown(String),
}

/// Every TaskManager this agent manages, keyed by id.
#[derive(Debug, Clone)]
pub struct Table {
    entries: BTreeMap<String, Entry>,
    stop_grace_ms: u64,
}

impl Table {
    pub fn new(stop_grace_ms: u64) -> Self {
        Self {
            entries: BTreeMap::new(),
            stop_grace_ms,
        }
    }

    /// Start `spec`. Same spec while live: nothing to do. Other spec while live: stop, then
    /// start the new one once the old process has ended (a restart).
    pub fn request_start(&mut self, spec: TaskManagerSpec, now_ms: u64) -> Vec<Action> {
        let grace = self.stop_grace_ms;
        let Some(entry) = self.entries.get_mut(&spec.id) else {
            let mut entry = Entry::new(spec.clone());
            let actions = entry.begin_start(spec.clone());
            self.entries.insert(spec.id, entry);
            return actions;
        };
        match entry.state {
            TaskManagerState::Starting | TaskManagerState::Running if entry.spec == spec => vec![],
            TaskManagerState::Starting | TaskManagerState::Running => {
                entry.restart_with = Some(spec);
                entry.begin_stop(now_ms, grace)
            }
            TaskManagerState::Stopping => {
                // The newest wish wins, also over a plain stop in progress.
                entry.restart_with = Some(spec);
                vec![]
            }
            TaskManagerState::Stopped | TaskManagerState::Failed(_) => entry.begin_start(spec),
        }
    }

    /// The backend started the process. A stop that arrived meanwhile is passed on now.
    pub fn spawned(&mut self, id: &str, pid: Option<u32>, now_ms: u64) -> Vec<Action> {
        let Some(entry) = self.entries.get_mut(id) else {
            return vec![];
        };
        entry.pid = pid;
        entry.started_at_ms = Some(now_ms);
        match entry.state {
            TaskManagerState::Starting => {
                entry.state = TaskManagerState::Running;
                vec![]
            }
            TaskManagerState::Stopping => vec![Action::Terminate { id: id.to_string() }],
            _ => vec![],
        }
    }

    pub fn spawn_failed(&mut self, id: &str, reason: &str) -> Vec<Action> {
        let Some(entry) = self.entries.get_mut(id) else {
            return vec![];
        };
        entry.pid = None;
        entry.state = TaskManagerState::Failed(format!("could not start: {reason}"));
        match entry.restart_with.take() {
            Some(spec) => entry.begin_start(spec),
            None => vec![],
        }
    }

    /// The process `pid` ended. An exit of an older process (after a restart) is ignored.
    pub fn exited(&mut self, id: &str, pid: Option<u32>, exit: Exit) -> Vec<Action> {
        let Some(entry) = self.entries.get_mut(id) else {
            return vec![];
        };
        if pid.is_some() && entry.pid.is_some() && pid != entry.pid {
            return vec![];
        }
        if !entry.is_live() {
            return vec![];
        }
        entry.pid = None;
        entry.kill_at_ms = None;
        if let Some(spec) = entry.restart_with.take() {
            return entry.begin_start(spec);
        }
        entry.state = if entry.kill_ordered {
            TaskManagerState::Failed(format!("{exit} on the coordinator's order"))
        } else if entry.state == TaskManagerState::Stopping {
            TaskManagerState::Stopped
        } else {
            TaskManagerState::Failed(exit.to_string())
        };
        vec![]
    }

    /// The process was started again behind the agent's back (systemd's `Restart=on-failure`).
    pub fn respawned(&mut self, id: &str, pid: u32, now_ms: u64) {
        if let Some(entry) = self.entries.get_mut(id)
            && matches!(entry.state, TaskManagerState::Failed(_))
        {
            entry.state = TaskManagerState::Running;
            entry.pid = Some(pid);
            entry.started_at_ms = Some(now_ms);
            entry.kill_ordered = false;
        }
    }

    /// Stop gracefully; SIGKILL follows after the grace period ([`Table::tick`]).
    pub fn request_stop(&mut self, id: &str, now_ms: u64) -> Result<Vec<Action>, Refusal> {
        let grace = self.stop_grace_ms;
        let entry = self
            .entries
            .get_mut(id)
            .ok_or_else(|| Refusal::Unknown(id.to_string()))?;
        entry.restart_with = None;
        Ok(match entry.state {
            TaskManagerState::Starting | TaskManagerState::Running => {
                entry.begin_stop(now_ms, grace)
            }
            _ => vec![],
        })
    }

    /// Kill now (failure injection). The exit is then reported as Failed, not Stopped.
    pub fn request_kill(&mut self, id: &str) -> Result<Vec<Action>, Refusal> {
        let entry = self
            .entries
            .get_mut(id)
            .ok_or_else(|| Refusal::Unknown(id.to_string()))?;
        if !entry.is_live() {
            return Ok(vec![]);
        }
        entry.restart_with = None;
        entry.kill_ordered = true;
        entry.kill_at_ms = None;
        Ok(vec![Action::Kill { id: id.to_string() }])
    }

    /// Escalates stops whose grace period has passed.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Action> {
        let mut actions = vec![];
        for (id, entry) in &mut self.entries {
            if entry.state == TaskManagerState::Stopping
                && entry.kill_at_ms.is_some_and(|at| now_ms >= at)
            {
                entry.kill_at_ms = None;
                actions.push(Action::Kill { id: id.clone() });
            }
        }
        actions
    }

    /// Stops every live TaskManager (agent shutdown).
    pub fn stop_all(&mut self, now_ms: u64) -> Vec<Action> {
        let ids: Vec<String> = self.entries.keys().cloned().collect();
        ids.iter()
            .filter_map(|id| self.request_stop(id, now_ms).ok())
            .flatten()
            .collect()
    }

    pub fn status(&self, id: &str) -> Option<TaskManagerStatus> {
        self.entries.get(id).map(|e| TaskManagerStatus {
            spec: e.spec.clone(),
            state: e.state.clone(),
            pid: e.pid,
            started_at_ms: e.started_at_ms,
        })
    }

    pub fn statuses(&self) -> Vec<TaskManagerStatus> {
        self.entries
            .keys()
            .filter_map(|id| self.status(id))
            .collect()
    }

    /// Whether any process may still be alive.
    pub fn any_live(&self) -> bool {
        self.entries.values().any(Entry::is_live)
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;

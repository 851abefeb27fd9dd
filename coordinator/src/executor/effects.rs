//! What the machine asks the outside world to do ([`Effect`]) and what comes back ([`Event`]).

use demeter_common::protocol::TaskManagerSpec;

use super::operation::{Operation, Step};
use crate::flink::{JobId, JobState, TriggerId};
use crate::models::space::JobConfig;

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Persist the operation durably before anything else happens. `finished` names the step
    /// this record closes (what `after-step:<name>` failpoints match).
    Journal {
        op: Box<Operation>,
        finished: Option<Step>,
    },
    /// Tell a human (log at error level; the daemon would page): the job needs attention.
    Alert { message: String },
    /// `POST /jobs/<job>/stop` with a savepoint, drain false. → [`Event::StopTriggered`]
    TriggerStop { job: JobId },
    /// `GET /jobs/<job>/savepoints/<trigger>`. → [`Event::Savepoint`]
    PollSavepoint { job: JobId, trigger: TriggerId },
    /// The old job's state and its newest savepoint since `since_ms`. → [`Event::StopInspected`]
    InspectStop { job: JobId, since_ms: u64 },
    /// Make exactly these TaskManagers of the job run. → [`Event::TaskManagersEnsured`]
    EnsureTaskManagers {
        job: String,
        specs: Vec<TaskManagerSpec>,
    },
    /// Registered TaskManagers (REST) and the backend's dead ones. → [`Event::TaskManagers`]
    QueryTaskManagers { job: String, ids: Vec<String> },
    /// `POST /jars/<jar>/run` with this job id, configuration and restore point.
    /// → [`Event::Submitted`]
    Submit {
        job_id: JobId,
        config: JobConfig,
        restore: Option<String>,
    },
    /// `GET /jobs/<job>`. → [`Event::Job`]
    QueryJob { job: JobId },
    /// `PUT /jobs/<job>/resource-requirements` with every vertex's upper bound at
    /// `parallelism`. → [`Event::Rescaled`]
    Rescale { job: JobId, parallelism: u32 },
    /// Ids of the TaskManagers running any subtask of the job (`GET
    /// /jobs/<job>/vertices/<vertex>/taskmanagers` per vertex). → [`Event::Placement`]
    QueryPlacement { job: JobId },
    /// `PATCH /jobs/<job>?mode=cancel`. → [`Event::Cancelled`]
    Cancel { job: JobId },
    /// The newest completed checkpoint or savepoint of a job. → [`Event::RestorePoint`]
    ReadRestorePoint { job: JobId },
}

impl Effect {
    /// Effects the driver only records or reports; they get no event back.
    pub fn is_fire_and_forget(&self) -> bool {
        matches!(self, Self::Journal { .. } | Self::Alert { .. })
    }
}

/// A failed effect. `message` is for humans; the machine decides from the step it is in.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub message: String,
}

impl Fault {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum SavepointProgress {
    InProgress,
    Completed {
        location: String,
    },
    /// Flink reports the savepoint failed; the job keeps running.
    Failed {
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct StopView {
    /// `None` when Flink does not know the job.
    pub state: Option<JobState>,
    /// A completed savepoint triggered at or after `since_ms`.
    pub savepoint: Option<String>,
    /// A checkpoint or savepoint is in progress.
    pub snapshot_in_progress: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredTm {
    pub id: String,
    pub slots: u32,
    pub memory_mb: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskManagersView {
    pub registered: Vec<RegisteredTm>,
    /// TaskManagers the backend started that are no longer alive (e.g. refused their memory).
    pub dead: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    pub state: JobState,
    /// Every vertex RUNNING.
    pub all_running: bool,
    /// (parallelism, max parallelism) per vertex.
    pub vertices: Vec<(u32, Option<u32>)>,
    /// Records the sources emitted so far (sum); `None` when not reported yet.
    pub source_records: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    StopTriggered(Result<TriggerId, Fault>),
    Savepoint(Result<SavepointProgress, Fault>),
    StopInspected(Result<StopView, Fault>),
    TaskManagersEnsured(Result<(), Fault>),
    TaskManagers(Result<TaskManagersView, Fault>),
    Submitted(Result<(), Fault>),
    /// `Ok(None)`: Flink does not know the job.
    Job(Result<Option<JobView>, Fault>),
    Rescaled(Result<(), Fault>),
    Placement(Result<Vec<String>, Fault>),
    Cancelled(Result<(), Fault>),
    RestorePoint(Result<Option<String>, Fault>),
}

//! Request/response types for the cluster, job and TaskManager endpoints of Flink 2.3's REST API.
//! Field names follow Flink's JSON; unknown fields are ignored so newer Flinks still decode.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }
    };
}

string_id!(
    /// 32-hex-digit job id.
    JobId
);
string_id!(
    /// Job vertex id (stable across runs when operators have uids).
    VertexId
);
string_id!(
    /// TaskManager resource id, e.g. `127.0.0.1:39073-8e6168`.
    TaskManagerId
);
string_id!(
    /// Id of an uploaded jar: the stored file's basename, e.g. `<uuid>_job.jar`.
    JarId
);
string_id!(
    /// Request id of an asynchronous savepoint or stop-with-savepoint operation.
    TriggerId
);

/// Reads a number that Flink may send as a JSON number, as a string (`"123"`), or as `"NaN"`;
/// anything that is not a finite number becomes `None`.
pub(crate) fn lenient_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumOrText {
        Num(f64),
        Text(String),
    }
    let parsed = match Option::<NumOrText>::deserialize(d)? {
        Some(NumOrText::Num(v)) => Some(v),
        Some(NumOrText::Text(s)) => s.trim().parse::<f64>().ok(),
        None => None,
    };
    Ok(parsed.filter(|v| v.is_finite()))
}

/// Reads an integer where Flink uses -1 for "unknown"; non-positive or absent becomes `None`.
fn positive_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Ok(Option::<i64>::deserialize(d)?
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v > 0))
}

/// `GET /overview`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ClusterOverview {
    pub taskmanagers: u32,
    pub slots_total: u32,
    pub slots_available: u32,
    pub jobs_running: u32,
    pub jobs_finished: u32,
    pub jobs_cancelled: u32,
    pub jobs_failed: u32,
    pub flink_version: String,
    pub flink_commit: String,
}

/// `GET /config` (the web UI's configuration, which includes the version).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DashboardConfig {
    pub refresh_interval: u64,
    pub flink_version: String,
    pub flink_revision: String,
    #[serde(default)]
    pub features: BTreeMap<String, bool>,
}

/// A job's global state as Flink names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    Initializing,
    Created,
    Running,
    Failing,
    Failed,
    Cancelling,
    Canceled,
    Finished,
    Restarting,
    Suspended,
    Reconciling,
    /// A state this client does not know (a newer Flink).
    #[serde(other)]
    Unknown,
}

impl JobState {
    /// Globally terminal: the job will not run again without a new submission.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Failed | Self::Canceled | Self::Finished)
    }
}

/// One entry of `GET /jobs/overview`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct JobOverview {
    pub jid: JobId,
    pub name: String,
    pub state: JobState,
    pub start_time: i64,
    /// -1 while the job runs.
    pub end_time: i64,
    pub duration: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct JobsOverviewResponse {
    pub jobs: Vec<JobOverview>,
}

/// Status of a vertex's subtasks (Flink's `ExecutionState`), kept as text: only `RUNNING`
/// matters to callers and new states must not break decoding.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct JobVertex {
    pub id: VertexId,
    pub name: String,
    pub parallelism: u32,
    /// `None` while Flink reports -1 (not yet decided).
    #[serde(rename = "maxParallelism", default, deserialize_with = "positive_u32")]
    pub max_parallelism: Option<u32>,
    pub status: String,
    #[serde(default)]
    pub metrics: Option<VertexSummaryMetrics>,
}

/// The cumulative counters `GET /jobs/<id>` embeds per vertex.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct VertexSummaryMetrics {
    #[serde(default, deserialize_with = "lenient_f64")]
    pub read_records: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub write_records: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub accumulated_busy_time: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub accumulated_backpressured_time: Option<f64>,
    #[serde(default, deserialize_with = "lenient_f64")]
    pub accumulated_idle_time: Option<f64>,
}

/// `GET /jobs/<id>`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct JobDetails {
    pub jid: JobId,
    pub name: String,
    pub state: JobState,
    pub start_time: i64,
    pub end_time: i64,
    pub duration: i64,
    /// `None` while Flink reports -1: the adaptive scheduler decides it when the job starts.
    #[serde(rename = "maxParallelism", default, deserialize_with = "positive_u32")]
    pub max_parallelism: Option<u32>,
    /// `Adaptive` when `jobmanager.scheduler: adaptive` (needed for resource requirements).
    #[serde(rename = "schedulerType", default)]
    pub scheduler_type: Option<String>,
    pub vertices: Vec<JobVertex>,
    #[serde(default)]
    pub plan: Option<JobPlan>,
}

impl JobDetails {
    /// Vertices that read no other vertex: the job's sources. Taken from the plan's edges;
    /// falls back to Flink's `Source:` name prefix if the plan is missing.
    pub fn source_vertices(&self) -> Vec<&JobVertex> {
        match &self.plan {
            Some(plan) => self
                .vertices
                .iter()
                .filter(|v| {
                    plan.nodes
                        .iter()
                        .any(|n| n.id == v.id && n.inputs.is_empty())
                })
                .collect(),
            None => self
                .vertices
                .iter()
                .filter(|v| v.name.starts_with("Source:"))
                .collect(),
        }
    }

    /// True when the job and every vertex run (a job can be RUNNING while tasks deploy).
    pub fn is_fully_running(&self) -> bool {
        self.state == JobState::Running && self.vertices.iter().all(|v| v.status == "RUNNING")
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobPlan {
    pub nodes: Vec<PlanNode>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PlanNode {
    pub id: VertexId,
    #[serde(default)]
    pub inputs: Vec<PlanInput>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PlanInput {
    pub id: VertexId,
}

/// Per-vertex parallelism bounds for the adaptive scheduler
/// (`GET`/`PUT /jobs/<id>/resource-requirements`).
pub type ResourceRequirements = BTreeMap<VertexId, VertexResourceRequirement>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VertexResourceRequirement {
    pub parallelism: ParallelismBounds,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParallelismBounds {
    pub lower_bound: u32,
    pub upper_bound: u32,
}

/// `GET /jobs/<id>/vertices/<vertex>/taskmanagers`: the TaskManagers a vertex's current
/// subtasks are deployed on.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct VertexTaskManagers {
    pub taskmanagers: Vec<VertexTaskManager>,
}

/// One TaskManager of [`VertexTaskManagers`]: its subtasks' aggregate status, kept as text
/// (any listed TaskManager holds subtasks, whatever their state).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct VertexTaskManager {
    pub taskmanager_id: TaskManagerId,
    #[serde(default)]
    pub status: Option<String>,
}

/// One entry of `GET /taskmanagers`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskManagerInfo {
    pub id: TaskManagerId,
    pub data_port: Option<u32>,
    pub slots_number: u32,
    pub free_slots: u32,
    pub hardware: Option<TaskManagerHardware>,
    pub memory_configuration: Option<TaskManagerMemory>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskManagerHardware {
    pub cpu_cores: u32,
    pub physical_memory: u64,
    pub free_memory: u64,
    pub managed_memory: u64,
}

/// The memory model the TM was started with, in bytes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskManagerMemory {
    pub framework_heap: u64,
    pub task_heap: u64,
    pub framework_off_heap: u64,
    pub task_off_heap: u64,
    pub network_memory: u64,
    pub managed_memory: u64,
    pub jvm_metaspace: u64,
    pub jvm_overhead: u64,
    pub total_flink_memory: u64,
    pub total_process_memory: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct TaskManagersResponse {
    pub taskmanagers: Vec<TaskManagerInfo>,
}

//! The messages agents and the coordinator exchange.
//!
//! Streams on one QUIC connection (the agent always dials):
//! - **control** (bidirectional, opened by the agent first): preamble + [`Hello`] →
//!   [`Welcome`], then [`CoordinatorMessage::Ack`]s flow back on it.
//! - **metrics** (unidirectional, agent → coordinator): preamble + a sequence of
//!   [`AgentMessage::Metrics`] frames, in sequence order.
//! - **orders** (bidirectional, opened by the coordinator): preamble + one
//!   [`CoordinatorMessage::Order`] → one [`AgentMessage::OrderResult`].
//!
//! CLI peers (role `cli`) use only the control stream: preamble + [`Hello`] announcing what
//! they will ask ([`Capability::FleetQuery`], [`Capability::Jobs`]), then requests
//! ([`AgentMessage::FleetQuery`], [`AgentMessage::Job`]) each answered in order; a job request
//! may be answered by several frames (an apply streams its progress, see [`jobs`]).
//!
//! The agent's identity is the name in its certificate, never a field it sends.

use serde::{Deserialize, Serialize};

use crate::metrics::Sample;

pub mod jobs;
pub mod tuning;

pub use jobs::{JobReply, JobRequest};

/// The protocol version this build speaks. Bumped on any incompatible change to the messages.
pub const PROTOCOL_VERSION: u16 = 1;

/// Every stream starts with these bytes, then the version as big-endian u16. They are not
/// bincode, so a peer of another version is recognised before anything is decoded.
pub const PREAMBLE_MAGIC: [u8; 4] = *b"DMTR";

/// Largest frame payload either side accepts; checked before any buffer is allocated.
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// QUIC application close codes, so the peer learns why the connection ended.
pub mod close_code {
    pub const NORMAL: u32 = 0;
    pub const PROTOCOL_VIOLATION: u32 = 1;
    pub const UNSUPPORTED_VERSION: u32 = 2;
    pub const FORBIDDEN: u32 = 3;
    pub const SHUTTING_DOWN: u32 = 4;
}

/// What a peer may be, as stated by its certificate (the coordinator's CA issues it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    Agent,
    Coordinator,
    Cli,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Coordinator => "coordinator",
            Role::Cli => "cli",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "agent" => Ok(Role::Agent),
            "coordinator" => Ok(Role::Coordinator),
            "cli" => Ok(Role::Cli),
            other => Err(format!(
                "unknown role {other:?} (expected agent, coordinator or cli)"
            )),
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// First message on the control stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Distinguishes one run of the agent process from the next: sequence numbers restart at 1
    /// in every boot, so the coordinator deduplicates per (agent, boot).
    pub boot_id: u64,
    /// Free-form software version of the peer, for logs and the fleet view.
    pub software: String,
    pub capabilities: Vec<Capability>,
}

/// Things a peer can do beyond the base protocol; lets old and new builds meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Capability {
    /// Sends metric batches.
    Metrics,
    /// Answers [`OrderKind::Ping`].
    Ping,
    /// Starts, stops and kills Flink TaskManagers on order.
    TaskManagers,
    /// Asks for the fleet view (CLI peers).
    FleetQuery,
    /// Registers, reconfigures and inspects managed jobs through the daemon's executor (CLI
    /// peers). Appended last: bincode numbers variants by position.
    Jobs,
}

/// The coordinator's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    /// The name the coordinator knows this peer by (from its certificate).
    pub peer_name: String,
    pub coordinator_software: String,
    /// Highest sequence number of this (agent, boot) already stored durably; the agent drops
    /// everything up to it and resends the rest.
    pub stored_up_to: u64,
}

/// Samples `first_seq, first_seq + 1, …` of one agent boot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricBatch {
    pub boot_id: u64,
    pub first_seq: u64,
    pub samples: Vec<Sample>,
}

impl MetricBatch {
    /// Sequence number of the last sample; `first_seq - 1` when empty.
    pub fn last_seq(&self) -> u64 {
        (self.first_seq + self.samples.len() as u64).saturating_sub(1)
    }
}

/// An order from the coordinator to one agent. Orders are idempotent by `id`: an agent that
/// sees an id again answers with the result it gave the first time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub id: u64,
    /// Milliseconds since the Unix epoch after which the agent must not start the order.
    pub deadline_ms: u64,
    pub kind: OrderKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OrderKind {
    /// Does nothing; measures the round trip and proves the agent is responsive.
    Ping,
    /// Start a TaskManager as specified; if one with this id runs with the same spec, nothing
    /// happens, and with another spec it is restarted with the new one.
    StartTaskManager(TaskManagerSpec),
    /// Stop a TaskManager gracefully (SIGTERM, then SIGKILL after the agent's grace period).
    StopTaskManager { id: String },
    /// Kill a TaskManager with SIGKILL: failure injection for profiling copies.
    KillTaskManager { id: String },
    /// Report every TaskManager this agent manages.
    ListTaskManagers,
}

/// A TaskManager the agent runs for a Flink cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskManagerSpec {
    /// Stable id; also Flink's `taskmanager.resource-id`, so REST and agent agree on names.
    pub id: String,
    /// Which Flink cluster it joins: a name the agent's config maps to that cluster's
    /// `FLINK_HOME` and configuration directory.
    pub cluster: String,
    /// `taskmanager.memory.process.size`, in MiB.
    pub process_memory_mb: u32,
    /// `taskmanager.numberOfTaskSlots`.
    pub slots: u32,
    /// CPU limit in thousandths of a core (1500 = 1.5 cores).
    pub cpu_millis: u32,
    /// Further Flink dynamic properties (`-D key=value`).
    pub properties: Vec<(String, String)>,
}

/// Process sizes (MiB) below which Flink's default framework and metaspace sizes do not fit
/// (`IllegalConfigurationException`, the TaskManager never starts), so the sizes measured to
/// work at 640m (flink-notes §2) are added unless the spec sets those keys itself.
pub const SMALL_TM_MB: u32 = 850;

const SMALL_TM_SIZES: [(&str, &str); 4] = [
    ("taskmanager.memory.jvm-metaspace.size", "160m"),
    ("taskmanager.memory.framework.off-heap.size", "64m"),
    ("taskmanager.memory.framework.heap.size", "64m"),
    ("taskmanager.memory.jvm-overhead.min", "128m"),
];

impl TaskManagerSpec {
    /// The `-D key=value` properties that start this TaskManager, in order: memory, slots,
    /// resource id, the small-TaskManager sizes when needed, then the spec's own. The agent's
    /// supervisor and the coordinator's local backend both start TaskManagers with these.
    pub fn dynamic_properties(&self) -> Vec<(String, String)> {
        let mut props = vec![
            (
                "taskmanager.memory.process.size".to_string(),
                format!("{}m", self.process_memory_mb),
            ),
            (
                "taskmanager.numberOfTaskSlots".to_string(),
                self.slots.to_string(),
            ),
            ("taskmanager.resource-id".to_string(), self.id.clone()),
        ];
        if self.process_memory_mb < SMALL_TM_MB {
            for (key, value) in SMALL_TM_SIZES {
                if !self.properties.iter().any(|(k, _)| k == key) {
                    props.push((key.to_string(), value.to_string()));
                }
            }
        }
        props.extend(self.properties.iter().cloned());
        props
    }
}

/// What an agent knows about one TaskManager it manages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskManagerStatus {
    pub spec: TaskManagerSpec,
    pub state: TaskManagerState,
    pub pid: Option<u32>,
    /// When the current process started, milliseconds since the Unix epoch.
    pub started_at_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TaskManagerState {
    Starting,
    Running,
    Stopping,
    Stopped,
    /// The process ended without being asked to; the text says how (exit code, signal).
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderResult {
    pub order_id: u64,
    pub outcome: OrderOutcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OrderOutcome {
    Done,
    /// Done, with the TaskManagers' state afterwards.
    TaskManagers(Vec<TaskManagerStatus>),
    /// The agent could not do it; the reason is for humans and logs.
    Failed(String),
    /// The deadline had passed before the agent could start.
    Expired,
    /// This agent build does not know the order kind.
    Unsupported,
}

/// A summary of one connected agent, for the fleet view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSummary {
    pub name: String,
    pub remote_addr: String,
    pub software: String,
    pub connected_since_ms: u64,
    pub boot_id: u64,
    pub stored_up_to: u64,
    pub last_sample: Option<Sample>,
}

/// One page of the fleet view: agents whose names sort after `after`, at most `limit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetQuery {
    pub after: Option<String>,
    pub limit: u32,
}

/// Most agents in one fleet page; keeps a page well inside [`MAX_FRAME_LEN`].
pub const MAX_FLEET_PAGE: u32 = 500;

/// Agent (or CLI) → coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AgentMessage {
    Hello(Hello),
    Metrics(MetricBatch),
    OrderResult(OrderResult),
    /// CLI peers only: list connected agents, a page at a time (a page must fit in a frame).
    FleetQuery(FleetQuery),
    /// CLI peers with [`Capability::Jobs`] only: a request to the daemon's executor.
    Job(JobRequest),
}

/// Coordinator → agent (or CLI).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CoordinatorMessage {
    Welcome(Welcome),
    /// Everything up to this sequence number of this boot is stored durably.
    Ack {
        boot_id: u64,
        stored_up_to: u64,
    },
    Order(Order),
    Fleet(Vec<AgentSummary>),
    /// One answer to an [`AgentMessage::Job`] request (an apply sends several).
    Job(JobReply),
}

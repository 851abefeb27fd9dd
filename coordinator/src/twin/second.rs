//! What the simulated job reports each second, and the events a second can end with.

use serde::{Deserialize, Serialize};

use crate::models::space::JobConfig;
use crate::policy::{ChangeKind, ReconfigureOutcome};

/// What the job was doing during a second (the worst of the second when it changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SimPhase {
    Running,
    /// Running with a backlog (after a failure or a change, or overloaded).
    CatchingUp,
    /// Running the old configuration while new TaskManagers start (in-place scale-up).
    Preparing,
    /// Down for a reconfiguration (or its rollback).
    Reconfiguring,
    /// Down after a failure: detection and restart.
    Failed,
}

/// Why a second is disrupted, for splitting the seconds over the latency QoS by cause.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Disruption {
    /// Steady operation (possibly overloaded: that is the configuration's fault).
    None,
    /// Inside a failure's recovery (failure → its backlog drained), which began at `since`.
    Failure { since: f64 },
    /// Inside a reconfiguration: from the change's start until the backlog it left is drained
    /// (downtime + catch-up). Takes precedence over a failure recovery overlapping it, so a
    /// change cannot hide its disruption behind a failure.
    Change,
}

/// One simulated second of production.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Second {
    pub t: u64,
    /// Events offered by the source during the second.
    pub rate: f64,
    pub processed: f64,
    /// Events waiting at the end of the second (new input, replay and catch-up).
    pub backlog: f64,
    pub phase: SimPhase,
    /// The configuration at the end of the second.
    pub config: JobConfig,
    /// Steady capacity of that configuration (events/s).
    pub capacity: f64,
    /// Share of the second spent processing.
    pub running_fraction: f64,
    /// True (noiseless) p95 latency of the second.
    pub latency_ms: f64,
    /// Allocated resources, averaged over the second.
    pub cpu_alloc: f64,
    pub memory_alloc_mb: f64,
    /// What, if anything, disrupted the second (at any point during it).
    pub disruption: Disruption,
}

/// Something the loop must hear about, produced by [`Job::step`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JobEvent {
    /// A reconfiguration finished (or was rolled back) at `at`.
    Reconfigured {
        at: f64,
        kind: ChangeKind,
        outcome: ReconfigureOutcome,
    },
    /// The backlog of the failure at `failed_at` was drained; `censored` when another failure
    /// came first (then `recovery_s` is the time until that failure).
    Recovered {
        failed_at: f64,
        recovery_s: f64,
        censored: bool,
    },
}

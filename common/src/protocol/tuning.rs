//! What the daemon tells a CLI about a tuned job (`job tuning NAME`): the live loop's latest
//! reading and forecast, and its newest decisions with their reasons. Numbers travel as
//! numbers and configurations as display text, as in [`super::jobs`]. Appended to only.

use serde::{Deserialize, Serialize};

/// Most decisions one answer carries.
pub const MAX_DECISIONS: u32 = 100;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningView {
    pub job: String,
    /// The policy tuning the job; None when the job is not in the daemon's `[tuning]` table.
    pub policy: Option<String>,
    pub live: Option<LiveLine>,
    /// Oldest first.
    pub decisions: Vec<DecisionLine>,
}

/// The newest reading of production and what the policy expects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveLine {
    pub at_ms: u64,
    /// `Running` or `Down`.
    pub phase: String,
    pub config: String,
    /// Offered input rate, records/s.
    pub rate: f64,
    pub latency_p95_ms: Option<f64>,
    pub busy_fraction: Option<f64>,
    pub cpu_cores: f64,
    pub memory_mb: f64,
    /// Forecast of the maximum rate over `horizon_s`: point and upper quantile.
    pub forecast: Option<(u32, f64, f64)>,
    /// Target of the reconfiguration in flight.
    pub reconfiguring: Option<String>,
    /// Profiling batch in flight.
    pub profiling: Option<u64>,
    pub totals: LiveTotals,
}

/// Sums over the readings since the loop started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveTotals {
    pub observed_s: f64,
    pub down_s: f64,
    pub over_qos_s: f64,
    /// Allocated cores × s and GiB × s of the deployed configurations.
    pub cpu_core_s: f64,
    pub memory_gib_s: f64,
    /// The same for profiling copies' TaskManagers while their batches ran.
    pub profiling_cpu_core_s: f64,
    pub profiling_memory_gib_s: f64,
    pub reconfigurations: u32,
    pub profiling_batches: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionLine {
    pub seq: u64,
    pub at_ms: u64,
    pub policy: String,
    /// What was ordered, in words.
    pub action: String,
    /// Why, in words.
    pub reason: String,
    /// The forecast it was based on, the chosen candidate's predicted numbers and the best
    /// rejected one with why, in words.
    pub forecast: Option<String>,
    pub chosen: Option<String>,
    pub rejected: Option<String>,
    /// How it ended, once known.
    pub outcome: Option<String>,
}

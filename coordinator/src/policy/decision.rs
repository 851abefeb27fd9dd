//! Decision records: every action a policy takes carries why, what it expected of the rate, and
//! the predicted numbers of what it chose and of the best candidate it rejected — so an operator
//! can ask "why did it do that?" afterwards (design §4.6). Stored as JSON by the daemon and
//! written to the simulator's decision log.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::models::space::JobConfig;

/// Why a policy acted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reason {
    /// The model knows too little about the configurations that matter at the coming rate.
    ProfileUncertain { miss_probability: f64 },
    /// A configuration the model calls feasible waits only for its TaskManager shape to be
    /// measured, and no full-size copy of it fits beside production: the shape is profiled on
    /// fewer TaskManagers.
    ProfileShape { candidate: JobConfig },
    /// A feasible configuration is cheaper by this fraction of the current cost, enough to pay
    /// for the change.
    Cheaper { saving: f64 },
    /// The current configuration is predicted to violate the QoS soon.
    QosRisk { p_feasible: f64 },
    /// Nothing is known to be feasible: fall back to the safe default.
    SafeDefault,
    /// The baseline's own rule (reactive: utilisation outside the target band; oracle: the
    /// true optimum for the coming window).
    Rule(String),
}

/// The forecast a decision was based on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ForecastSummary {
    pub horizon_s: u32,
    pub point_max: f64,
    pub upper_max: f64,
}

/// What the model predicted for one candidate at the rate decided for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CandidateNumbers {
    pub config: JobConfig,
    pub rate: f64,
    /// Probability of meeting both QoS bounds (1 or 0 for policies that know the truth).
    pub p_feasible: f64,
    /// Median predictions.
    pub latency_p95_ms: f64,
    pub recovery_s: f64,
    /// Allocated resources (the cost objectives).
    pub cpu_cores: f64,
    pub memory_mb: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub at: Duration,
    pub reason: Reason,
    pub forecast: Option<ForecastSummary>,
    pub chosen: Option<CandidateNumbers>,
    /// The best candidate not taken, and why not.
    pub best_rejected: Option<(CandidateNumbers, String)>,
}

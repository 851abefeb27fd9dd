//! What the oracle knows and only the twin can give it: the simulated job's true curves, the
//! rate of every future second and the failure schedule.

use crate::models::space::{JobConfig, SearchSpace};
use crate::models::surrogate::Qos;
use crate::twin::truth::GroundTruth;

/// What the oracle knows: the simulated job's truth and future.
#[derive(Debug, Clone)]
pub struct Foresight {
    pub truth: GroundTruth,
    pub space: SearchSpace,
    pub qos: Qos,
    /// The rate of every second from the start of the run.
    pub rates: Vec<f64>,
    /// The cost reference (the static configuration): ½ CPU + ½ memory relative to it.
    pub reference: JobConfig,
    /// A production TaskManager dies every this many seconds (the twin's failure injection).
    pub failures_every_s: Option<u64>,
}

impl Foresight {
    /// Normalised cost per second: ½ · CPU + ½ · memory relative to the reference.
    pub fn cost(&self, config: &JobConfig) -> f64 {
        0.5 * config.total_cpu_cores() / self.reference.total_cpu_cores().max(1e-9)
            + 0.5 * config.total_memory_mb() / self.reference.total_memory_mb().max(1e-9)
    }

    /// Whether `config` truly meets both QoS bounds at `rate`.
    pub fn feasible(&self, config: &JobConfig, rate: f64) -> bool {
        let o = self.truth.outcomes(config, rate);
        self.truth.can_run(config)
            && o.latency_p95_ms <= self.qos.latency_p95_ms
            && o.recovery_s <= self.qos.recovery_s
    }
}

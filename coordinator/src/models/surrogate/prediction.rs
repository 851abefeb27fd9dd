//! What the surrogates say about one configuration at one rate, and the feasible Pareto front.

use serde::{Deserialize, Serialize};

use crate::models::mobo::ehvi::normal_cdf;
use crate::models::mobo::pareto_front_indices;
use crate::models::space::JobConfig;

/// Absolute, user-stated QoS (design §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Qos {
    pub latency_p95_ms: f64,
    pub recovery_s: f64,
}

/// A log-normal belief about a positive outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub log_mean: f64,
    pub log_sd: f64,
}

impl Estimate {
    pub fn median(&self) -> f64 {
        self.log_mean.exp()
    }

    /// The value `z` standard deviations above the median (negative `z`: below).
    pub fn at_sigma(&self, z: f64) -> f64 {
        (self.log_mean + z * self.log_sd).exp()
    }

    pub fn prob_at_most(&self, threshold: f64) -> f64 {
        if threshold <= 0.0 {
            return 0.0;
        }
        if self.log_sd <= 0.0 {
            return if self.log_mean <= threshold.ln() {
                1.0
            } else {
                0.0
            };
        }
        normal_cdf((threshold.ln() - self.log_mean) / self.log_sd)
    }
}

/// What the model believes about `config` at `rate`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConfigPrediction {
    pub config: JobConfig,
    pub rate: f64,
    pub capacity: Estimate,
    pub latency_p95_ms: Estimate,
    pub recovery_s: Estimate,
}

impl ConfigPrediction {
    /// Probability that both QoS bounds hold (latency and recovery treated as independent).
    pub fn p_feasible(&self, qos: &Qos) -> f64 {
        self.latency_p95_ms.prob_at_most(qos.latency_p95_ms)
            * self.recovery_s.prob_at_most(qos.recovery_s)
    }

    pub fn total_cpu_cores(&self) -> f64 {
        self.config.total_cpu_cores()
    }

    pub fn total_memory_mb(&self) -> f64 {
        self.config.total_memory_mb()
    }
}

/// Configurations with `p_feasible ≥ min_probability` that no other such configuration beats on
/// both total CPU and total memory, cheapest CPU first.
pub fn feasible_pareto<'a>(
    predictions: &'a [ConfigPrediction],
    qos: &Qos,
    min_probability: f64,
) -> Vec<&'a ConfigPrediction> {
    let mut feasible: Vec<(f64, &ConfigPrediction)> = predictions
        .iter()
        .map(|p| (p.p_feasible(qos), p))
        .filter(|(probability, _)| *probability >= min_probability)
        .collect();
    // Equal cost, different configs: the front keeps the first, so the likeliest goes first.
    feasible.sort_by(|a, b| b.0.total_cmp(&a.0));
    let costs: Vec<Vec<f64>> = feasible
        .iter()
        .map(|(_, p)| vec![p.total_cpu_cores(), p.total_memory_mb()])
        .collect();
    let mut front: Vec<&ConfigPrediction> = pareto_front_indices(&costs)
        .into_iter()
        .map(|i| feasible[i].1)
        .collect();
    front.sort_by(|a, b| {
        a.total_cpu_cores()
            .total_cmp(&b.total_cpu_cores())
            .then(a.total_memory_mb().total_cmp(&b.total_memory_mb()))
    });
    front
}

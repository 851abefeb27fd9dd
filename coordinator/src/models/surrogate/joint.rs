//! Joint posteriors of the constraint outcomes over a candidate set, for batch acquisition:
//! Kriging-believer batches need the cross terms so that a pick makes its neighbours less
//! uncertain too (otherwise a batch is q near-copies of one configuration).

use super::{Surrogate, UNFITTED_LOG_SD};
use crate::Result;
use crate::models::gp::{Posterior, Predictions};
use crate::models::mobo::Constraint;
use crate::models::space::JobConfig;
use crate::models::surrogate::Qos;

impl Surrogate {
    /// Latency and recovery constraints (log space, thresholds `ln` of the QoS) of every
    /// configuration in `configs` at `rate`. An outcome without a fitted GP gets independent
    /// marginals from its prior.
    pub fn constraint_posteriors(
        &self,
        configs: &[JobConfig],
        rate: f64,
        qos: &Qos,
    ) -> Result<Vec<Constraint>> {
        let xs: Vec<Vec<f64>> = configs
            .iter()
            .map(|c| self.space.normalise(c, rate).to_vec())
            .collect();
        let thresholds = [
            qos.latency_p95_ms.max(1e-9).ln(),
            qos.recovery_s.max(1e-9).ln(),
        ];
        let mut out = Vec::with_capacity(2);
        for (outcome, threshold) in [1usize, 2].into_iter().zip(thresholds) {
            let posterior = match &self.gps[outcome] {
                Some(gp) => gp.posterior(&xs)?,
                None => {
                    let mean = configs
                        .iter()
                        .map(|c| self.unfitted(outcome, c, rate).log_mean)
                        .collect();
                    let variance = vec![UNFITTED_LOG_SD * UNFITTED_LOG_SD; configs.len()];
                    Posterior::from_marginals(Predictions { mean, variance }, 0.0)
                }
            };
            out.push(Constraint {
                posterior,
                threshold,
            });
        }
        Ok(out)
    }
}

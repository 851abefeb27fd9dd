//! The per-objective surrogate set: one GP per learned outcome (capacity, p95 latency, recovery
//! time), each on the log of the outcome with a physics prior mean (or, for comparison, none),
//! plus the known cost. Predicts everything about a configuration at a rate, with uncertainty.
//!
//! The priors are chained: the capacity GP corrects the log-linear capacity prior, and the
//! latency and recovery priors are evaluated at that *corrected* capacity — so a busy-fraction
//! measurement at any load sharpens the latency and recovery predictions of nearby configs too.
//!
//! Two robustness choices for the physics GPs (both measured in `benches/surrogate.rs`):
//! residuals are winsorised at ±1 in log space, and centred on their median rather than their
//! mean — overload rows, where a small capacity error is a huge latency error, otherwise pull
//! the predictions for stable configurations. Inputs are those of
//! [`SearchSpace::normalise`] (memory and CPU per slot, not per TaskManager).
//!
//! Latency and recovery are treated as independent when combining their probabilities of
//! meeting the QoS.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::models::gp::{FitOptions, Gp, Hyperparameters, MeanFn, ZeroMean};
use crate::models::observations::Observation;
use crate::models::physics::{LATENCY_CAP_MS, PhysicsPrior, RECOVERY_CAP_S, median};
use crate::models::space::{INPUT_DIMS, JobConfig, SearchSpace};

mod bounds;
mod prediction;
use bounds::CapacityBounds;
pub use prediction::{ConfigPrediction, Estimate, Qos, feasible_pareto};

/// Log-space standard deviation reported for an outcome no observation has informed yet.
pub const UNFITTED_LOG_SD: f64 = 1.5;
/// Physics residuals (log space) are winsorised at ± this before the GP sees them.
const MAX_RESIDUAL: f64 = 1.0;
/// Fewer rows than this for an outcome and no GP is fitted (prior only).
const MIN_ROWS: usize = 2;
/// Least signal variance (log space) of a physics GP: how far the prior may be off for a
/// configuration nothing near it was measured on. The fit standardises residuals, so data from
/// one configuration (production before any profiling: residuals ≈ noise) would otherwise
/// claim the prior exact everywhere — an unmeasured shape's capacity then came with a standard
/// deviation of 0, and a copy that drowned at a third of its predicted capacity hardly moved it.
const MIN_SIGNAL_VARIANCE: f64 = 0.3 * 0.3;

/// Hyperparameter search suited to these surrogates: a noise floor (outcomes are measured
/// with noise; without a floor the GP may interpolate it) and lengthscales of at least a tenth
/// of a grid's extent (shorter would treat neighbouring grid values as unrelated).
pub fn fit_options(seed: u64) -> FitOptions {
    let mut options = FitOptions {
        seed,
        ..FitOptions::default()
    };
    options.bounds.noise_variance.0 = 1e-2;
    options.bounds.lengthscale.0 = 0.3;
    options
}

/// Which prior mean the GPs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PriorMean {
    /// Physics-informed (the design's choice).
    Physics,
    /// A constant learned by the GP: the black-box baseline.
    Plain,
}

/// The learned outcomes, in the order the surrogate stores their GPs.
const OUTCOMES: [&str; 3] = ["capacity", "latency_p95_ms", "recovery_s"];

/// Everything needed to rebuild a fitted surrogate without refitting hyperparameters
/// (what `model fit --save` writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SurrogateSnapshot {
    pub space: SearchSpace,
    pub prior: PriorMean,
    pub physics: PhysicsPrior,
    pub observations: Vec<Observation>,
    /// Per outcome (capacity, latency, recovery); `None` where no GP was fitted.
    pub hyperparameters: Vec<Option<Hyperparameters>>,
}

/// Fitted surrogates for one job.
#[derive(Debug, Clone)]
pub struct Surrogate {
    space: SearchSpace,
    prior: PriorMean,
    physics: PhysicsPrior,
    observations: Vec<Observation>,
    gps: [Option<Gp>; 3],
    capacity_bounds: Arc<CapacityBounds>,
}

/// Either fit hyperparameters or reuse saved ones.
enum Hyper<'a> {
    Fit(&'a FitOptions),
    Fixed(&'a [Option<Hyperparameters>]),
}

impl Surrogate {
    pub fn fit(
        space: &SearchSpace,
        observations: &[Observation],
        prior: PriorMean,
        options: &FitOptions,
    ) -> Result<Self> {
        Self::build(
            space,
            observations,
            prior,
            PhysicsPrior::fit(observations),
            Hyper::Fit(options),
        )
    }

    pub fn from_snapshot(snapshot: &SurrogateSnapshot) -> Result<Self> {
        Self::build(
            &snapshot.space,
            &snapshot.observations,
            snapshot.prior,
            snapshot.physics.clone(),
            Hyper::Fixed(&snapshot.hyperparameters),
        )
    }

    pub fn snapshot(&self) -> SurrogateSnapshot {
        SurrogateSnapshot {
            space: self.space.clone(),
            prior: self.prior,
            physics: self.physics.clone(),
            observations: self.observations.clone(),
            hyperparameters: self.hyperparameters(),
        }
    }

    /// Per outcome (capacity, latency, recovery); `None` where no GP was fitted.
    pub fn hyperparameters(&self) -> Vec<Option<Hyperparameters>> {
        self.gps
            .iter()
            .map(|gp| gp.as_ref().map(|g| g.hyperparameters().clone()))
            .collect()
    }

    fn build(
        space: &SearchSpace,
        observations: &[Observation],
        prior: PriorMean,
        mut physics: PhysicsPrior,
        hyper: Hyper<'_>,
    ) -> Result<Self> {
        let x = |o: &Observation| space.normalise(&o.config, o.rate).to_vec();
        let fit = |index, rows: Vec<_>, measured, mean| {
            fit_outcome(index, rows, measured, mean, &hyper, prior)
        };

        // A saturated run bounds capacity from above; where the prior believes more, the row
        // pins capacity at the bound (the most it can be), else it adds nothing. Without it a
        // profiled copy that drowned taught the capacity model nothing, and the same hopeless
        // candidate was profiled again. The row teaches the neighbours; the configuration
        // itself is capped at the bound (the GP alone shrinks one row towards the prior).
        let capacity_bounds = Arc::new(CapacityBounds::new(space, observations));
        let mut capacity_rows: Vec<(Vec<f64>, f64)> = observations
            .iter()
            .filter_map(|o| Some((capacity_input(&x(o)), o.capacity_estimate()?.ln())))
            .collect();
        let measured = capacity_rows.len();
        capacity_rows.extend(observations.iter().filter_map(|o| {
            let bound = o.capacity_bound()?;
            (physics.capacity(&o.config) > bound).then(|| (capacity_input(&x(o)), bound.ln()))
        }));
        let capacity_gp = fit(
            0,
            capacity_rows,
            measured,
            capacity_mean(space, &physics, prior),
        )?;

        if prior == PriorMean::Physics
            && matches!(hyper, Hyper::Fit(_))
            && let Some(gp) = &capacity_gp
        {
            // Re-fit latency/recovery scalars against the corrected capacity they will be
            // evaluated with, so the prior and its use agree.
            let corrected =
                CorrectedCapacity::new(space, &physics, Some(gp.clone()), &capacity_bounds);
            let capacities: Vec<f64> = observations.iter().map(|o| corrected.at(&x(o))).collect();
            physics.fit_dynamics(observations, &capacities);
        }
        let corrected = Arc::new(CorrectedCapacity::new(
            space,
            &physics,
            capacity_gp.clone(),
            &capacity_bounds,
        ));

        let latency_rows = observations
            .iter()
            .map(|o| (x(o), o.latency_p95_ms.min(LATENCY_CAP_MS).ln()))
            .collect();
        let latency_mean: Arc<dyn MeanFn> = match prior {
            PriorMean::Plain => Arc::new(ZeroMean),
            PriorMean::Physics => {
                let (corrected, physics) = (corrected.clone(), physics.clone());
                Arc::new(move |x: &[f64]| {
                    let (_, rate) = corrected.space.denormalise(x);
                    physics.latency_ms_at(corrected.at(x), rate).ln()
                })
            }
        };
        let latency_gp = fit(1, latency_rows, usize::MAX, latency_mean)?;

        let recovery_rows = observations
            .iter()
            .filter_map(|o| Some((x(o), o.recovery_s?.min(RECOVERY_CAP_S).ln())))
            .collect();
        let recovery_mean: Arc<dyn MeanFn> = match prior {
            PriorMean::Plain => Arc::new(ZeroMean),
            PriorMean::Physics => {
                let (corrected, physics) = (corrected.clone(), physics.clone());
                Arc::new(move |x: &[f64]| {
                    let (config, rate) = corrected.space.denormalise(x);
                    let interval = config.checkpoint_interval_s;
                    physics.recovery_s_at(corrected.at(x), rate, interval).ln()
                })
            }
        };
        let recovery_gp = fit(2, recovery_rows, usize::MAX, recovery_mean)?;

        Ok(Surrogate {
            space: space.clone(),
            prior,
            physics,
            observations: observations.to_vec(),
            gps: [capacity_gp, latency_gp, recovery_gp],
            capacity_bounds,
        })
    }

    pub fn space(&self) -> &SearchSpace {
        &self.space
    }

    /// The fitted measurement noise (standard deviation, log space) of the latency and the
    /// recovery GPs: what one more measurement of a configuration is blurred by. 0 for an
    /// outcome without a fitted GP.
    pub fn constraint_noise_sd(&self) -> (f64, f64) {
        let sd = |gp: &Option<Gp>| {
            gp.as_ref()
                .map_or(0.0, |g| g.hyperparameters().noise_variance.max(0.0).sqrt())
        };
        (sd(&self.gps[1]), sd(&self.gps[2]))
    }

    pub fn physics(&self) -> &PhysicsPrior {
        &self.physics
    }

    pub fn prior(&self) -> PriorMean {
        self.prior
    }

    pub fn observations(&self) -> &[Observation] {
        &self.observations
    }

    pub fn predict(&self, config: &JobConfig, rate: f64) -> Result<ConfigPrediction> {
        let mut out = self.predict_many(std::slice::from_ref(config), rate)?;
        out.pop()
            .ok_or_else(|| crate::Error::Model("no prediction for one configuration".into()))
    }

    /// Median capacity of every configuration in `configs` at `rate`, from the posterior mean
    /// alone (no variance): cheap enough to screen candidates before [`Self::predict_many`].
    pub fn capacity_medians(&self, configs: &[JobConfig], rate: f64) -> Result<Vec<f64>> {
        let xs: Vec<Vec<f64>> = configs
            .iter()
            .map(|c| self.space.normalise(c, rate).to_vec())
            .collect();
        match &self.gps[0] {
            Some(gp) => Ok(gp
                .predict_mean_batch(&xs.iter().map(|x| capacity_input(x)).collect::<Vec<_>>())?
                .into_iter()
                .zip(&xs)
                .map(|(m, x)| self.capacity_bounds.cap(x, m).exp())
                .collect()),
            None => Ok(configs
                .iter()
                .zip(&xs)
                .map(|(c, x)| {
                    self.capacity_bounds
                        .cap(x, self.unfitted(0, c, rate).log_mean)
                        .exp()
                })
                .collect()),
        }
    }

    /// Predicts every configuration in `configs` at one rate (one batched solve per GP).
    pub fn predict_many(&self, configs: &[JobConfig], rate: f64) -> Result<Vec<ConfigPrediction>> {
        let xs: Vec<Vec<f64>> = configs
            .iter()
            .map(|c| self.space.normalise(c, rate).to_vec())
            .collect();
        let mut per_outcome = Vec::with_capacity(OUTCOMES.len());
        for (index, gp) in self.gps.iter().enumerate() {
            let estimates: Vec<Estimate> = match gp {
                Some(gp) => {
                    let p = if index == 0 {
                        let inputs: Vec<Vec<f64>> = xs.iter().map(|x| capacity_input(x)).collect();
                        gp.predict_batch(&inputs)?
                    } else {
                        gp.predict_batch(&xs)?
                    };
                    p.mean
                        .iter()
                        .zip(&p.variance)
                        .map(|(&m, &v)| Estimate {
                            log_mean: m,
                            log_sd: v.max(0.0).sqrt(),
                        })
                        .collect()
                }
                None => configs
                    .iter()
                    .map(|c| self.unfitted(index, c, rate))
                    .collect(),
            };
            per_outcome.push(estimates);
        }
        Ok(configs
            .iter()
            .enumerate()
            .map(|(i, config)| ConfigPrediction {
                config: *config,
                rate,
                capacity: Estimate {
                    log_mean: self.capacity_bounds.cap(&xs[i], per_outcome[0][i].log_mean),
                    ..per_outcome[0][i]
                },
                latency_p95_ms: per_outcome[1][i],
                recovery_s: per_outcome[2][i],
            })
            .collect())
    }

    /// The prior alone, very uncertain: physics if we have it, else an uninformative guess
    /// (median 1, so any threshold is a coin toss at best).
    fn unfitted(&self, index: usize, config: &JobConfig, rate: f64) -> Estimate {
        let log_mean = match self.prior {
            PriorMean::Plain => 0.0,
            PriorMean::Physics => match index {
                0 => self.physics.capacity(config).ln(),
                1 => self.physics.latency_ms(config, rate).ln(),
                _ => self.physics.recovery_s(config, rate).ln(),
            },
        };
        Estimate {
            log_mean,
            log_sd: UNFITTED_LOG_SD,
        }
    }
}

/// `rows[..measured]` are measurements, the rest bounds: only measurements centre the
/// residuals (bounds are one-sided, so their median would shift every prediction down).
fn fit_outcome(
    index: usize,
    rows: Vec<(Vec<f64>, f64)>,
    measured: usize,
    mean: Arc<dyn MeanFn>,
    hyper: &Hyper<'_>,
    prior: PriorMean,
) -> Result<Option<Gp>> {
    if rows.len() < MIN_ROWS {
        return Ok(None);
    }
    let (xs, mut ys): (Vec<Vec<f64>>, Vec<f64>) = rows.into_iter().unzip();
    if prior == PriorMean::Physics {
        // Where the prior is off by more than e^MAX_RESIDUAL (typically overload, where a small
        // capacity error is a huge latency error), a smooth GP cannot fix it locally and would
        // drag its neighbours along; keep the direction, bound the size (winsorised residuals).
        for (x, y) in xs.iter().zip(ys.iter_mut()) {
            let m = mean.mean(x);
            *y = m + (*y - m).clamp(-MAX_RESIDUAL, MAX_RESIDUAL);
        }
    }
    let gp = match hyper {
        Hyper::Fit(options) if prior == PriorMean::Physics => {
            // The GP centres residuals on their mean; overload rows (where a small capacity
            // error means a huge latency error) would then shift every prediction. The physics
            // scalars were fitted with a robust loss, so centre on the median instead.
            let fitted = Gp::fit(&xs, &ys, mean.clone(), options)?;
            let residuals: Vec<f64> = xs
                .iter()
                .zip(&ys)
                .take(measured)
                .map(|(x, y)| y - mean.mean(x))
                .collect();
            let fitted = fitted.hyperparameters();
            let hyper = Hyperparameters {
                mean_offset: median(&residuals),
                signal_variance: fitted.signal_variance.max(MIN_SIGNAL_VARIANCE),
                ..fitted.clone()
            };
            Gp::new(&xs, &ys, mean, hyper)?
        }
        Hyper::Fit(options) => Gp::fit(&xs, &ys, mean, options)?,
        Hyper::Fixed(saved) => match saved.get(index).cloned().flatten() {
            Some(h) => Gp::new(&xs, &ys, mean, h)?,
            None => return Ok(None),
        },
    };
    tracing::debug!(outcome = OUTCOMES[index], ?prior, n = ys.len(), hyper = ?gp.hyperparameters(), "fitted surrogate");
    Ok(Some(gp))
}

fn capacity_mean(space: &SearchSpace, physics: &PhysicsPrior, prior: PriorMean) -> Arc<dyn MeanFn> {
    match prior {
        PriorMean::Plain => Arc::new(ZeroMean),
        PriorMean::Physics => {
            let (space, physics) = (space.clone(), physics.clone());
            Arc::new(move |x: &[f64]| physics.capacity(&space.denormalise(x).0).ln())
        }
    }
}

/// The capacity GP's input for GP input `x`: the configuration alone. Capacity (rate / busy)
/// is a property of the configuration; with the rate as an input, busy-fraction noise at the
/// rates production happened to run made capacity trends in the rate, extrapolated to the
/// forecast peak (the median swung by a fifth between epochs while claiming ±2 %).
fn capacity_input(x: &[f64]) -> Vec<f64> {
    let mut input = x.to_vec();
    if let Some(rate) = input.get_mut(INPUT_DIMS - 1) {
        *rate = 0.0;
    }
    input
}

/// Capacity as the latency and recovery priors see it: the capacity GP's posterior mean where
/// there is one, the log-linear prior otherwise; never above a saturated run's bound.
struct CorrectedCapacity {
    space: SearchSpace,
    physics: PhysicsPrior,
    gp: Option<Gp>,
    bounds: Arc<CapacityBounds>,
}

impl CorrectedCapacity {
    fn new(
        space: &SearchSpace,
        physics: &PhysicsPrior,
        gp: Option<Gp>,
        bounds: &Arc<CapacityBounds>,
    ) -> Self {
        CorrectedCapacity {
            space: space.clone(),
            physics: physics.clone(),
            gp,
            bounds: bounds.clone(),
        }
    }

    fn at(&self, x: &[f64]) -> f64 {
        let learned = self
            .gp
            .as_ref()
            .and_then(|gp| gp.predict_mean(&capacity_input(x)).ok())
            .map(f64::exp);
        let capacity =
            learned.unwrap_or_else(|| self.physics.capacity(&self.space.denormalise(x).0));
        self.bounds.cap(x, capacity.ln()).exp()
    }
}

#[cfg(test)]
mod tests;

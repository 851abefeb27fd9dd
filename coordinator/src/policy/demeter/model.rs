//! Keeps the surrogates current without spending the decision budget on hyperparameters:
//! a full fit (physics scalars and GP hyperparameters by marginal likelihood, ~seconds) only
//! when the data changed in kind — first fit, a new outcome became fittable, the memory grew a
//! lot, or `full_refit_every_s` passed — and otherwise the new observations are conditioned on
//! with the last hyperparameters and physics scalars (a Cholesky per outcome, milliseconds).

use crate::Result;
use crate::models::observations::Observation;
use crate::models::space::SearchSpace;
use crate::models::surrogate::{PriorMean, Surrogate, SurrogateSnapshot, fit_options};

/// A full refit when the observation count grew by this factor since the last one.
const GROWTH_FOR_REFIT: f64 = 1.5;

/// How the surrogate was last brought up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    Unchanged,
    Conditioned,
    FullFit,
}

#[derive(Debug, Clone)]
struct LastFull {
    at_s: f64,
    n: usize,
    with_recovery: usize,
    with_capacity: usize,
}

#[derive(Debug, Clone)]
pub struct Model {
    space: SearchSpace,
    seed: u64,
    restarts: usize,
    full_every_s: f64,
    surrogate: Option<Surrogate>,
    last_full: Option<LastFull>,
    full_fits: u64,
}

impl Model {
    pub fn new(space: SearchSpace, seed: u64, restarts: usize, full_every_s: u64) -> Self {
        Model {
            space,
            seed,
            restarts,
            full_every_s: full_every_s as f64,
            surrogate: None,
            last_full: None,
            full_fits: 0,
        }
    }

    pub fn surrogate(&self) -> Option<&Surrogate> {
        self.surrogate.as_ref()
    }

    /// Brings the surrogate up to `observations` (`changed`: anything new since last time).
    pub fn refresh(
        &mut self,
        now_s: f64,
        observations: &[Observation],
        changed: bool,
    ) -> Result<Refresh> {
        if observations.is_empty() {
            return Ok(Refresh::Unchanged);
        }
        if self.surrogate.is_some() && !changed {
            return Ok(Refresh::Unchanged);
        }
        let with_recovery = observations
            .iter()
            .filter(|o| o.recovery_s.is_some())
            .count();
        let with_capacity = observations
            .iter()
            .filter(|o| o.capacity_estimate().is_some())
            .count();
        let full = match (&self.last_full, &self.surrogate) {
            (Some(last), Some(_)) => {
                now_s - last.at_s >= self.full_every_s
                    || observations.len() as f64 >= GROWTH_FOR_REFIT * last.n.max(1) as f64
                    || (last.with_recovery < 2 && with_recovery >= 2)
                    || (last.with_capacity < 2 && with_capacity >= 2)
            }
            _ => true,
        };
        if !full && let Some(old) = &self.surrogate {
            let snapshot = SurrogateSnapshot {
                space: self.space.clone(),
                prior: PriorMean::Physics,
                physics: old.physics().clone(),
                observations: observations.to_vec(),
                hyperparameters: old.hyperparameters(),
            };
            // A fixed-hyperparameter rebuild can fail only on a degenerate factorisation;
            // a full fit is the cure then.
            if let Ok(surrogate) = Surrogate::from_snapshot(&snapshot) {
                self.surrogate = Some(surrogate);
                return Ok(Refresh::Conditioned);
            }
        }
        let options = crate::models::gp::FitOptions {
            restarts: self.restarts,
            ..fit_options(self.seed.wrapping_add(self.full_fits))
        };
        let surrogate = Surrogate::fit(&self.space, observations, PriorMean::Physics, &options)?;
        self.full_fits += 1;
        self.last_full = Some(LastFull {
            at_s: now_s,
            n: observations.len(),
            with_recovery,
            with_capacity,
        });
        self.surrogate = Some(surrogate);
        Ok(Refresh::FullFit)
    }
}

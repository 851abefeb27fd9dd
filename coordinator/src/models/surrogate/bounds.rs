//! Upper bounds on capacity from saturated runs. A configuration that could not keep up with
//! rate `r` has a capacity of at most `r`, whatever the GP, which treats the bound as one noisy
//! row among many, makes of it; so predictions for that exact configuration are capped.

use crate::models::observations::Observation;
use crate::models::space::{INPUT_DIMS, SearchSpace};

/// The configuration's coordinates (every normalised input but the rate).
const CONFIG_DIMS: usize = INPUT_DIMS - 1;

#[derive(Debug, Clone, Default)]
pub(super) struct CapacityBounds {
    /// Least saturating rate (log) per configuration, keyed by its normalised coordinates so
    /// a GP input can be looked up without rounding it back to a configuration.
    log_bounds: Vec<([f64; CONFIG_DIMS], f64)>,
}

impl CapacityBounds {
    pub(super) fn new(space: &SearchSpace, observations: &[Observation]) -> Self {
        let mut log_bounds: Vec<([f64; CONFIG_DIMS], f64)> = Vec::new();
        for o in observations {
            let Some(bound) = o.capacity_bound() else {
                continue;
            };
            let key = config_key(&space.normalise(&o.config, o.rate));
            let bound = bound.ln();
            match log_bounds.iter_mut().find(|(k, _)| *k == key) {
                Some((_, least)) => *least = least.min(bound),
                None => log_bounds.push((key, bound)),
            }
        }
        CapacityBounds { log_bounds }
    }

    /// `log_capacity` at GP input `x`, no more than any bound measured on its configuration.
    pub(super) fn cap(&self, x: &[f64], log_capacity: f64) -> f64 {
        let key = config_key(x);
        self.log_bounds
            .iter()
            .filter(|(k, _)| *k == key)
            .fold(log_capacity, |capped, (_, bound)| capped.min(*bound))
    }
}

fn config_key(x: &[f64]) -> [f64; CONFIG_DIMS] {
    let mut key = [f64::NAN; CONFIG_DIMS];
    for (k, v) in key.iter_mut().zip(x) {
        *k = *v;
    }
    key
}

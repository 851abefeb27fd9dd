//! Gaussian-process regression: ARD Matérn-5/2, caller-supplied prior mean, hyperparameters
//! by maximum marginal likelihood, batch prediction and cheap one-observation updates.
//!
//! Inputs are expected in the unit cube (see [`Normalizer`]); outputs are standardised
//! internally. Randomness (hyperparameter restarts, subsets) is seeded through [`FitOptions`].

pub mod hyper;
pub mod inputs;
pub mod kernel;
pub mod linalg;
pub mod model;
pub mod optim;
pub mod posterior;
#[cfg(test)]
mod tests;

pub use hyper::{FitOptions, HyperBounds, lml_with_gradient};
pub use inputs::{MeanFn, Normalizer, ZeroMean};
pub use kernel::Matern52;
pub use model::{Gp, Hyperparameters, Prediction, Predictions};
pub use posterior::Posterior;

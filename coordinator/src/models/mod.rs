//! Models of a managed job and the decision maths built on them (all sans-IO: data and time are
//! arguments, no I/O, seeded randomness): the input-rate forecast, the configuration space,
//! observations, physics-informed priors, the GP core, the per-objective surrogates and
//! constrained multi-objective Bayesian optimisation.

pub mod change;
pub mod forecast;
pub mod gp;
pub mod mobo;
pub mod observations;
pub mod physics;
pub mod space;
pub mod surrogate;

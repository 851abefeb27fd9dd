//! Models of a managed job: the configuration space, observations, physics-informed priors and
//! the per-objective surrogates built on them.

pub mod observations;
pub mod physics;
pub mod space;
pub mod surrogate;

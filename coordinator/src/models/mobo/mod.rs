//! Constrained multi-objective Bayesian optimisation over a discrete candidate set: objectives
//! known exactly or modelled, GP-modelled constraints `g(x) ≤ t`, EHVI × probability of
//! feasibility, Kriging-believer batches and a test of whether enough is known to decide.

pub mod acquisition;
pub mod ehvi;
pub mod enough;
pub mod hypervolume;
pub mod problems;
pub mod sobol;
#[cfg(test)]
mod tests;

pub use acquisition::{
    AcquisitionOptions, AcquisitionProblem, Choice, Constraint, Mode, Objective,
    probability_of_feasibility, score_candidates, select_batch,
};
pub use enough::{EnoughKnown, EnoughKnownOptions, enough_known};
pub use hypervolume::{dominates, hypervolume, pareto_front, pareto_front_indices};

//! Surrogate models and the decision maths built on them (all sans-IO).

pub mod gp;
pub mod mobo;

//! Posterior over a fixed candidate set that can be conditioned on "fantasy" observations at
//! some of the candidates without touching the GP: each fantasy costs O(m·(n + d)) for m
//! candidates and n observations. Batch acquisition uses this for Kriging-believer selection.

use nalgebra::DMatrix;

use super::kernel::Matern52;
use super::model::{Gp, Predictions};
use crate::Result;

/// Marginals at candidates, plus what is needed to condition them jointly.
#[derive(Debug, Clone)]
pub struct Posterior {
    predictions: Predictions,
    /// Boxed: posteriors travel in enums and vectors, the joint part is large.
    joint: Option<Box<Joint>>,
    /// Noise variance a fantasy observation carries, in output units.
    noise_variance: f64,
}

#[derive(Clone)]
struct Joint {
    /// The GP's unit-variance kernel (its lengthscales), for prior covariances of candidates.
    kernel: Matern52,
    signal_variance: f64,
    candidates: Vec<Vec<f64>>,
    /// `L⁻¹ K(X, C)`, `n × m`, standardised.
    v: DMatrix<f64>,
    /// One row per fantasy: its standardised covariance with every candidate, scaled.
    fantasies: Vec<Vec<f64>>,
}

impl std::fmt::Debug for Joint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joint")
            .field("candidates", &self.candidates.len())
            .field("fantasies", &self.fantasies.len())
            .finish_non_exhaustive()
    }
}

impl Gp {
    /// Posterior at `xs` that remembers the cross terms, for joint conditioning later.
    pub fn posterior<X: AsRef<[f64]>>(&self, xs: &[X]) -> Result<Posterior> {
        let (weights, v) = self.solve_cross(xs)?;
        let predictions = self.marginals(xs, &weights, &v);
        Ok(Posterior {
            predictions,
            noise_variance: self.noise_std() * self.hyperparameters().signal_variance,
            joint: Some(Box::new(Joint {
                kernel: self.unit_kernel().clone(),
                signal_variance: self.hyperparameters().signal_variance,
                candidates: xs.iter().map(|x| x.as_ref().to_vec()).collect(),
                v,
                fantasies: Vec::new(),
            })),
        })
    }
}

impl Posterior {
    /// Independent marginals (no GP behind them): conditioning touches only the chosen one.
    pub fn from_marginals(predictions: Predictions, noise_variance: f64) -> Self {
        Self {
            predictions,
            joint: None,
            noise_variance,
        }
    }

    pub fn predictions(&self) -> &Predictions {
        &self.predictions
    }

    pub fn mean(&self) -> &[f64] {
        &self.predictions.mean
    }

    pub fn variance(&self) -> &[f64] {
        &self.predictions.variance
    }

    pub fn len(&self) -> usize {
        self.predictions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.predictions.is_empty()
    }

    /// Posterior covariance (output units²) of every candidate with candidate `j`.
    pub fn covariance_with(&self, j: usize) -> Vec<f64> {
        let Some(joint) = &self.joint else {
            let mut c = vec![0.0; self.len()];
            c[j] = self.predictions.variance[j];
            return c;
        };
        let s2 = joint.signal_variance;
        // One matrix-vector product for the data's share of every covariance.
        let explained = joint.v.tr_mul(&joint.v.column(j));
        let xj = &joint.candidates[j];
        (0..self.len())
            .map(|a| {
                let mut c = joint.kernel.eval(&joint.candidates[a], xj) - explained[a];
                for f in &joint.fantasies {
                    c -= f[a] * f[j];
                }
                s2 * c
            })
            .collect()
    }

    /// Conditions on observing `y` (with the model's noise) at candidate `j`.
    pub fn condition(&mut self, j: usize, y: f64) {
        let cov = self.covariance_with(j);
        let denom = cov[j] + self.noise_variance;
        if denom <= 0.0 {
            return;
        }
        let residual = y - self.predictions.mean[j];
        for (a, c) in cov.iter().enumerate() {
            self.predictions.mean[a] += c / denom * residual;
            self.predictions.variance[a] = (self.predictions.variance[a] - c * c / denom).max(0.0);
        }
        if let Some(joint) = &mut self.joint {
            let scale = 1.0 / (denom * joint.signal_variance).sqrt();
            joint
                .fantasies
                .push(cov.iter().map(|c| c * scale).collect());
        }
    }

    /// Kriging believer: pretend the observation equals the current mean (only variances shrink).
    pub fn condition_on_mean(&mut self, j: usize) {
        let y = self.predictions.mean[j];
        self.condition(j, y);
    }
}

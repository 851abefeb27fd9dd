//! The exact GP: Cholesky factor with escalating jitter, batch prediction with one blocked
//! triangular solve, and O(n²) extension by one observation.

use std::sync::Arc;

use nalgebra::{DMatrix, DVector};

use super::hyper::{self, FitOptions};
use super::inputs::MeanFn;
use super::kernel::Matern52;
use super::linalg::{Factor, factorize};
use crate::{Error, Result};

/// Hyperparameters in the caller's output units. The GP works on `(y − m(x) − mean_offset) /
/// √signal_variance` internally, so the same values can be reused for a refit on new data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Hyperparameters {
    /// One per input dimension, in normalised (unit-cube) units.
    pub lengthscales: Vec<f64>,
    pub signal_variance: f64,
    pub noise_variance: f64,
    /// Constant added to the caller's prior mean.
    pub mean_offset: f64,
}

/// Latent posterior at one input (noise excluded from `variance`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    pub mean: f64,
    pub variance: f64,
}

impl Prediction {
    pub fn std_dev(&self) -> f64 {
        self.variance.max(0.0).sqrt()
    }
}

/// Latent posterior marginals at many inputs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Predictions {
    pub mean: Vec<f64>,
    pub variance: Vec<f64>,
}

impl Predictions {
    pub fn len(&self) -> usize {
        self.mean.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mean.is_empty()
    }

    pub fn get(&self, i: usize) -> Prediction {
        Prediction {
            mean: self.mean[i],
            variance: self.variance[i],
        }
    }
}

/// A Gaussian process regression model over inputs in the unit cube.
#[derive(Clone)]
pub struct Gp {
    hyper: Hyperparameters,
    /// Unit-variance kernel on the standardised scale.
    kernel: Matern52,
    /// Noise variance divided by the signal variance.
    noise: f64,
    jitter: f64,
    mean_fn: Arc<dyn MeanFn>,
    inputs: Vec<Vec<f64>>,
    targets: Vec<f64>,
    /// Inputs divided by the lengthscales, one row each.
    scaled: DMatrix<f64>,
    /// Standardised residuals.
    z: DVector<f64>,
    /// Lower Cholesky factor of `K + (noise + jitter) I`.
    chol: Factor,
    alpha: DVector<f64>,
}

impl std::fmt::Debug for Gp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gp")
            .field("n", &self.len())
            .field("hyperparameters", &self.hyper)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl Gp {
    /// Conditions on `(xs, ys)` with fixed hyperparameters (no optimisation).
    pub fn new<X: AsRef<[f64]>>(
        xs: &[X],
        ys: &[f64],
        mean_fn: Arc<dyn MeanFn>,
        hyper: Hyperparameters,
    ) -> Result<Self> {
        validate(&hyper)?;
        let d = hyper.lengthscales.len();
        check_data(xs, ys, d)?;
        let scale = hyper.signal_variance.sqrt();
        let inputs: Vec<Vec<f64>> = xs.iter().map(|x| x.as_ref().to_vec()).collect();
        let z = DVector::from_iterator(
            ys.len(),
            inputs
                .iter()
                .zip(ys)
                .map(|(x, y)| (y - mean_fn.mean(x) - hyper.mean_offset) / scale),
        );
        let kernel = Matern52::new(hyper.lengthscales.clone(), 1.0);
        let scaled = kernel.scale_rows(&inputs);
        let noise = hyper.noise_variance / hyper.signal_variance;
        let (chol, jitter) = factorize(kernel.gram_scaled(&scaled), noise)?;
        let alpha = chol.solve(&z)?;
        Ok(Self {
            hyper,
            kernel,
            noise,
            jitter,
            mean_fn,
            inputs,
            targets: ys.to_vec(),
            scaled,
            z,
            chol,
            alpha,
        })
    }

    /// Maximises the log marginal likelihood over the hyperparameters, then conditions.
    pub fn fit<X: AsRef<[f64]>>(
        xs: &[X],
        ys: &[f64],
        mean_fn: Arc<dyn MeanFn>,
        options: &FitOptions,
    ) -> Result<Self> {
        let d = xs.first().map_or(0, |x| x.as_ref().len());
        check_data(xs, ys, d)?;
        let residuals: Vec<f64> = xs
            .iter()
            .zip(ys)
            .map(|(x, y)| y - mean_fn.mean(x.as_ref()))
            .collect();
        let hyper = hyper::optimise(xs, &residuals, options)?;
        Self::new(xs, ys, mean_fn, hyper)
    }

    /// Refits the hyperparameters on the current data (warm start is not used: seeded restarts).
    pub fn refit(&self, options: &FitOptions) -> Result<Self> {
        Self::fit(&self.inputs, &self.targets, self.mean_fn.clone(), options)
    }

    pub fn hyperparameters(&self) -> &Hyperparameters {
        &self.hyper
    }

    pub fn mean_fn(&self) -> &Arc<dyn MeanFn> {
        &self.mean_fn
    }

    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    pub fn dim(&self) -> usize {
        self.hyper.lengthscales.len()
    }

    pub fn inputs(&self) -> &[Vec<f64>] {
        &self.inputs
    }

    pub fn targets(&self) -> &[f64] {
        &self.targets
    }

    /// Jitter that had to be added to the diagonal (standardised units); 0 when none.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// Log marginal likelihood of the targets under the current hyperparameters.
    pub fn log_marginal_likelihood(&self) -> f64 {
        let n = self.len() as f64;
        let log_det: f64 = self.chol.l().diagonal().iter().map(|v| v.ln()).sum();
        -0.5 * self.z.dot(&self.alpha)
            - log_det
            - 0.5 * n * (2.0 * std::f64::consts::PI).ln()
            - 0.5 * n * self.hyper.signal_variance.ln()
    }

    /// The posterior mean alone at one input: `O(n·d)`, no triangular solve. Prior means that
    /// chain GPs (the surrogate's corrected capacity) call this per candidate.
    pub fn predict_mean(&self, x: &[f64]) -> Result<f64> {
        if x.len() != self.dim() {
            return Err(Error::Model(format!(
                "GP input has {} dimensions, model has {}",
                x.len(),
                self.dim()
            )));
        }
        let kt = self
            .kernel
            .cross_scaled(&self.scaled, &self.kernel.scale_rows(&[x]));
        let w = kt.column(0).dot(&self.alpha);
        Ok(self.mean_fn.mean(x) + self.hyper.mean_offset + self.hyper.signal_variance.sqrt() * w)
    }

    pub fn predict(&self, x: &[f64]) -> Result<Prediction> {
        Ok(self.predict_batch(&[x])?.get(0))
    }

    /// Posterior marginals at many inputs: one cross-covariance product and one blocked
    /// triangular solve for all of them.
    pub fn predict_batch<X: AsRef<[f64]>>(&self, xs: &[X]) -> Result<Predictions> {
        let (weights, v) = self.solve_cross(xs)?;
        Ok(self.marginals(xs, &weights, &v))
    }

    /// `K(xs, X) α` (the standardised posterior mean) and `V = L⁻¹ K(X, xs)` (`n × m`);
    /// shared by prediction and fantasies.
    pub(crate) fn solve_cross<X: AsRef<[f64]>>(
        &self,
        xs: &[X],
    ) -> Result<(DVector<f64>, DMatrix<f64>)> {
        let kt = self.cross(xs)?;
        let weights = kt.tr_mul(&self.alpha);
        Ok((weights, self.chol.solve_lower(kt)))
    }

    /// `K(X, xs)` (`n × m`), after checking the inputs' dimension.
    fn cross<X: AsRef<[f64]>>(&self, xs: &[X]) -> Result<DMatrix<f64>> {
        if let Some(bad) = xs.iter().find(|x| x.as_ref().len() != self.dim()) {
            return Err(Error::Model(format!(
                "GP input has {} dimensions, model has {}",
                bad.as_ref().len(),
                self.dim()
            )));
        }
        Ok(self
            .kernel
            .cross_scaled(&self.scaled, &self.kernel.scale_rows(xs)))
    }

    /// The posterior mean alone: no triangular solve (the `n² m` part of a prediction), so
    /// candidates can be screened on it before the full prediction.
    pub fn predict_mean_batch<X: AsRef<[f64]>>(&self, xs: &[X]) -> Result<Vec<f64>> {
        let weights = self.cross(xs)?.tr_mul(&self.alpha);
        let s = self.hyper.signal_variance.sqrt();
        Ok(xs
            .iter()
            .zip(weights.iter())
            .map(|(x, w)| self.mean_fn.mean(x.as_ref()) + self.hyper.mean_offset + s * w)
            .collect())
    }

    pub(crate) fn marginals<X: AsRef<[f64]>>(
        &self,
        xs: &[X],
        weights: &DVector<f64>,
        v: &DMatrix<f64>,
    ) -> Predictions {
        let s2 = self.hyper.signal_variance;
        let s = s2.sqrt();
        let mean = xs
            .iter()
            .zip(weights.iter())
            .map(|(x, w)| self.mean_fn.mean(x.as_ref()) + self.hyper.mean_offset + s * w)
            .collect();
        let variance = v
            .column_iter()
            .map(|c| s2 * (1.0 - c.norm_squared()).max(0.0))
            .collect();
        Predictions { mean, variance }
    }

    /// The kernel on the standardised scale (unit signal variance).
    pub(crate) fn unit_kernel(&self) -> &Matern52 {
        &self.kernel
    }

    /// Standardised noise plus jitter, the diagonal a new observation would get.
    pub(crate) fn noise_std(&self) -> f64 {
        self.noise + self.jitter
    }

    /// Adds one observation keeping the hyperparameters: the Cholesky factor gains one row
    /// (`O(n²)`), falling back to a full factorisation only if that row is not positive.
    pub fn add_observation(&mut self, x: &[f64], y: f64) -> Result<()> {
        check_data(&[x], &[y], self.dim())?;
        let n = self.len();
        let z_new =
            (y - self.mean_fn.mean(x) - self.hyper.mean_offset) / self.hyper.signal_variance.sqrt();
        let x_scaled = self.kernel.scale_rows(&[x]);
        let k = self.kernel.cross_scaled(&self.scaled, &x_scaled);
        let row = self.chol.solve_lower(k);
        let pivot = 1.0 + self.noise + self.jitter - row.norm_squared();

        self.inputs.push(x.to_vec());
        self.targets.push(y);
        self.scaled = self.scaled.clone().insert_row(n, 0.0);
        self.scaled.row_mut(n).copy_from(&x_scaled.row(0));
        self.z = self.z.clone().push(z_new);

        if pivot > 1e-12 {
            self.chol.push_row(row.as_slice(), pivot.sqrt());
        } else {
            let (chol, jitter) = factorize(self.kernel.gram_scaled(&self.scaled), self.noise)?;
            self.chol = chol;
            self.jitter = jitter;
        }
        self.alpha = self.chol.solve(&self.z)?;
        Ok(())
    }
}

fn validate(h: &Hyperparameters) -> Result<()> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    let valid = !h.lengthscales.is_empty()
        && h.lengthscales.iter().all(|&l| positive(l))
        && positive(h.signal_variance)
        && h.noise_variance.is_finite()
        && h.noise_variance >= 0.0
        && h.mean_offset.is_finite();
    if !valid {
        return Err(Error::Model(format!("invalid GP hyperparameters {h:?}")));
    }
    Ok(())
}

fn check_data<X: AsRef<[f64]>>(xs: &[X], ys: &[f64], d: usize) -> Result<()> {
    if xs.len() != ys.len() {
        return Err(Error::Model(format!(
            "{} inputs but {} targets",
            xs.len(),
            ys.len()
        )));
    }
    if xs.is_empty() || d == 0 {
        return Err(Error::Model("GP needs at least one observation".into()));
    }
    for (x, y) in xs.iter().zip(ys) {
        let x = x.as_ref();
        if x.len() != d || !y.is_finite() || !x.iter().all(|v| v.is_finite()) {
            return Err(Error::Model(format!(
                "bad observation {x:?} -> {y} (expected {d} finite inputs)"
            )));
        }
    }
    Ok(())
}

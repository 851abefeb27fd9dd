//! Hyperparameters by maximising the log marginal likelihood (LML) with analytic gradients:
//! multi-start L-BFGS in log space, bounds enforced by a logistic reparametrisation.

use nalgebra::{DMatrix, DVector};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::kernel::matern52_with_derivative;
use super::linalg::factorize;
use super::model::Hyperparameters;
use super::optim::lbfgs;
use crate::{Error, Result};

/// Box bounds (min, max) on standardised-scale hyperparameters; inputs are in the unit cube and
/// outputs standardised to unit variance, so the defaults suit any data set.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HyperBounds {
    pub lengthscale: (f64, f64),
    pub signal_variance: (f64, f64),
    pub noise_variance: (f64, f64),
}

impl Default for HyperBounds {
    fn default() -> Self {
        Self {
            lengthscale: (0.02, 20.0),
            signal_variance: (0.05, 20.0),
            noise_variance: (1e-6, 2.0),
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FitOptions {
    pub bounds: HyperBounds,
    /// Random starts besides the default one.
    pub restarts: usize,
    /// L-BFGS iterations per start.
    pub max_iters: usize,
    /// Above this many observations the LML is optimised on a seeded random subset of this
    /// size (the final GP still conditions on all data): the LML gradient is O(n³).
    pub max_points: usize,
    pub seed: u64,
}

impl Default for FitOptions {
    fn default() -> Self {
        Self {
            bounds: HyperBounds::default(),
            restarts: 4,
            max_iters: 60,
            max_points: 300,
            seed: 0,
        }
    }
}

/// Squared coordinate differences of every pair `i > j`, `d` per pair, in the order the LML
/// loops visit them: computed once per optimisation instead of once per evaluation.
pub(crate) struct PairDiffs {
    n: usize,
    d: usize,
    squared: Vec<f64>,
}

impl PairDiffs {
    pub(crate) fn new(xs: &DMatrix<f64>) -> Self {
        let (n, d) = xs.shape();
        let mut squared = Vec::with_capacity(n * n.saturating_sub(1) / 2 * d);
        for j in 0..n {
            for i in (j + 1)..n {
                squared.extend((0..d).map(|k| (xs[(i, k)] - xs[(j, k)]).powi(2)));
            }
        }
        Self { n, d, squared }
    }
}

/// LML of standardised targets `z` and its gradient with respect to the log-parameters
/// `[ln l₁ … ln l_d, ln σ_f², ln σ_n²]`. Public so the gradient can be checked numerically.
pub fn lml_with_gradient(
    xs: &DMatrix<f64>,
    z: &DVector<f64>,
    log_params: &[f64],
) -> Result<(f64, Vec<f64>)> {
    lml_from_pairs(&PairDiffs::new(xs), z, log_params)
}

pub(crate) fn lml_from_pairs(
    pairs: &PairDiffs,
    z: &DVector<f64>,
    log_params: &[f64],
) -> Result<(f64, Vec<f64>)> {
    let (n, d) = (pairs.n, pairs.d);
    if log_params.len() != d + 2 || z.len() != n {
        return Err(Error::Model("LML parameter length mismatch".into()));
    }
    let inv_l2: Vec<f64> = log_params[..d].iter().map(|p| (-2.0 * p).exp()).collect();
    let sf2 = log_params[d].exp();
    let sn2 = log_params[d + 1].exp();
    // Per pair: the correlation and the radial derivative share one exponential.
    let (corr, radial): (Vec<f64>, Vec<f64>) = pairs
        .squared
        .chunks_exact(d.max(1))
        .map(|sq| {
            let r2: f64 = sq.iter().zip(&inv_l2).map(|(a, b)| a * b).sum();
            matern52_with_derivative(r2.sqrt())
        })
        .unzip();

    // Only the lower triangle: the Cholesky and the gradient read nothing else.
    let mut gram = DMatrix::zeros(n, n);
    let mut p = 0;
    for j in 0..n {
        gram[(j, j)] = sf2;
        for i in (j + 1)..n {
            gram[(i, j)] = sf2 * corr[p];
            p += 1;
        }
    }
    let (factor, _) = factorize(gram.clone(), sn2)?;
    let chol = factor.l();
    let w = chol
        .solve_lower_triangular(z)
        .ok_or_else(|| Error::Model("singular factor".into()))?;
    let alpha = chol
        .tr_solve_lower_triangular(&w)
        .ok_or_else(|| Error::Model("singular factor".into()))?;
    let log_det: f64 = chol.diagonal().iter().map(|v| v.ln()).sum();
    let lml = -0.5 * z.dot(&alpha) - log_det - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();

    // ∂LML/∂θ = ½ tr((ααᵀ − K⁻¹) ∂K/∂θ); off-diagonal pairs are counted once with weight 1.
    let l_inv = factor.solve_lower(DMatrix::identity(n, n));
    let k_inv = l_inv.tr_mul(&l_inv);
    let mut grad = vec![0.0; d + 2];
    let mut trace_w = 0.0;
    let mut p = 0;
    for j in 0..n {
        let wjj = alpha[j] * alpha[j] - k_inv[(j, j)];
        trace_w += wjj;
        grad[d] += 0.5 * wjj * sf2;
        for i in (j + 1)..n {
            let wij = alpha[i] * alpha[j] - k_inv[(i, j)];
            grad[d] += wij * gram[(i, j)];
            let common = wij * sf2 * radial[p];
            let sq = &pairs.squared[p * d..(p + 1) * d];
            for k in 0..d {
                grad[k] += common * sq[k] * inv_l2[k];
            }
            p += 1;
        }
    }
    grad[d + 1] = 0.5 * sn2 * trace_w;
    Ok((lml, grad))
}

/// Fits hyperparameters to residuals `y − m(x)`; returns them in the residuals' units.
pub(crate) fn optimise<X: AsRef<[f64]>>(
    xs: &[X],
    residuals: &[f64],
    options: &FitOptions,
) -> Result<Hyperparameters> {
    let n = residuals.len();
    let d = xs.first().map_or(0, |x| x.as_ref().len());
    let mut rng = StdRng::seed_from_u64(options.seed);
    let rows: Vec<usize> = if n > options.max_points.max(2) {
        let mut idx = rand::seq::index::sample(&mut rng, n, options.max_points.max(2)).into_vec();
        idx.sort_unstable();
        idx
    } else {
        (0..n).collect()
    };
    let offset = residuals.iter().sum::<f64>() / n as f64;
    let var = residuals.iter().map(|r| (r - offset).powi(2)).sum::<f64>() / n as f64;
    let scale = if var > 1e-300 { var.sqrt() } else { 1.0 };
    let pairs = PairDiffs::new(&DMatrix::from_fn(rows.len(), d, |i, k| {
        xs[rows[i]].as_ref()[k]
    }));
    let sub_z = DVector::from_iterator(
        rows.len(),
        rows.iter().map(|&i| (residuals[i] - offset) / scale),
    );

    let b = &options.bounds;
    let mut box_ = vec![ln_pair(b.lengthscale); d];
    box_.push(ln_pair(b.signal_variance));
    box_.push(ln_pair(b.noise_variance));
    let to_params = |u: &[f64]| -> Vec<f64> {
        u.iter()
            .zip(&box_)
            .map(|(v, (lo, hi))| lo + (hi - lo) * sigmoid(*v))
            .collect()
    };
    let objective = |u: &[f64]| -> (f64, Vec<f64>) {
        let p = to_params(u);
        match lml_from_pairs(&pairs, &sub_z, &p) {
            Ok((lml, g)) => {
                let m = sub_z.len() as f64;
                let grad = u
                    .iter()
                    .zip(&box_)
                    .zip(&g)
                    .map(|((v, (lo, hi)), gp)| {
                        let s = sigmoid(*v);
                        -gp * (hi - lo) * s * (1.0 - s) / m
                    })
                    .collect();
                (-lml / m, grad)
            }
            Err(_) => (f64::INFINITY, vec![0.0; u.len()]),
        }
    };

    let default_start: Vec<f64> = {
        let mut p = vec![0.3f64.ln(); d];
        p.push(0.0);
        p.push(0.01f64.ln());
        p.iter()
            .zip(&box_)
            .map(|(v, (lo, hi))| logit((v.clamp(*lo, *hi) - lo) / (hi - lo)))
            .collect()
    };
    let mut best: Option<(f64, Vec<f64>)> = None;
    for start in 0..=options.restarts {
        let u0 = if start == 0 {
            default_start.clone()
        } else {
            (0..d + 2).map(|_| rng.random_range(-2.5..2.5)).collect()
        };
        let m = lbfgs(&objective, u0, options.max_iters);
        if m.value.is_finite() && best.as_ref().is_none_or(|(v, _)| m.value < *v) {
            best = Some((m.value, m.x));
        }
    }
    let (neg_lml, u) = best.ok_or_else(|| {
        Error::Model(format!(
            "LML optimisation failed from every start (n = {n})"
        ))
    })?;
    let p = to_params(&u);
    tracing::debug!(
        n,
        subset = rows.len(),
        lml_per_point = -neg_lml,
        restarts = options.restarts,
        "GP hyperparameters fitted"
    );
    Ok(Hyperparameters {
        lengthscales: p[..d].iter().map(|v| v.exp()).collect(),
        signal_variance: p[d].exp() * scale * scale,
        noise_variance: p[d + 1].exp() * scale * scale,
        mean_offset: offset,
    })
}

fn ln_pair((lo, hi): (f64, f64)) -> (f64, f64) {
    (lo.ln(), hi.ln())
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

fn logit(p: f64) -> f64 {
    let p = p.clamp(1e-6, 1.0 - 1e-6);
    (p / (1.0 - p)).ln()
}

//! A small unconstrained L-BFGS with backtracking (Armijo) line search.
//!
//! Hand-written rather than `argmin`: the problem is ≤ ~12 smooth parameters, the whole method
//! is ~100 lines, and `argmin` would add a dozen crates plus a math backend pinned to its own
//! nalgebra version.

/// Result of a minimisation.
#[derive(Debug, Clone)]
pub struct Minimum {
    pub x: Vec<f64>,
    pub value: f64,
    pub iterations: usize,
}

const MEMORY: usize = 8;
const ARMIJO: f64 = 1e-4;

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Minimises `f`, which returns the value and the gradient (a non-finite value means "outside
/// the domain" and makes the line search back off). Stops after `max_iters` iterations or when
/// the gradient or the relative decrease becomes negligible.
pub fn lbfgs(
    mut f: impl FnMut(&[f64]) -> (f64, Vec<f64>),
    x0: Vec<f64>,
    max_iters: usize,
) -> Minimum {
    let mut x = x0;
    let (mut fx, mut g) = f(&x);
    let mut history: Vec<(Vec<f64>, Vec<f64>, f64)> = Vec::with_capacity(MEMORY);
    let mut iterations = 0;
    if !fx.is_finite() {
        return Minimum {
            x,
            value: fx,
            iterations,
        };
    }
    while iterations < max_iters {
        iterations += 1;
        if dot(&g, &g).sqrt() < 1e-5 {
            break;
        }
        let mut dir = two_loop(&g, &history);
        let mut slope = dot(&g, &dir);
        if slope >= 0.0 {
            // Not a descent direction (bad curvature pairs): restart from steepest descent.
            history.clear();
            dir = g.iter().map(|v| -v).collect();
            slope = -dot(&g, &g);
        }
        let mut step = if history.is_empty() {
            (1.0 / dot(&dir, &dir).sqrt()).min(1.0)
        } else {
            1.0
        };
        let mut accepted = None;
        for _ in 0..40 {
            let trial: Vec<f64> = x.iter().zip(&dir).map(|(a, d)| a + step * d).collect();
            let (ft, gt) = f(&trial);
            if ft.is_finite() && ft <= fx + ARMIJO * step * slope {
                accepted = Some((trial, ft, gt));
                break;
            }
            step *= 0.5;
        }
        let Some((x_new, f_new, g_new)) = accepted else {
            break;
        };
        let s: Vec<f64> = x_new.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = g_new.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-12 {
            if history.len() == MEMORY {
                history.remove(0);
            }
            history.push((s, y, 1.0 / sy));
        }
        let decrease = fx - f_new;
        x = x_new;
        fx = f_new;
        g = g_new;
        if decrease.abs() <= 1e-9 * fx.abs().max(1.0) {
            break;
        }
    }
    Minimum {
        x,
        value: fx,
        iterations,
    }
}

/// The L-BFGS two-loop recursion: `-H g` for the implicit inverse Hessian `H`.
fn two_loop(g: &[f64], history: &[(Vec<f64>, Vec<f64>, f64)]) -> Vec<f64> {
    let mut q = g.to_vec();
    let mut alphas = vec![0.0; history.len()];
    for (i, (s, y, rho)) in history.iter().enumerate().rev() {
        alphas[i] = rho * dot(s, &q);
        q.iter_mut()
            .zip(y)
            .for_each(|(qv, yv)| *qv -= alphas[i] * yv);
    }
    if let Some((s, y, _)) = history.last() {
        let gamma = dot(s, y) / dot(y, y);
        q.iter_mut().for_each(|v| *v *= gamma);
    }
    for (i, (s, y, rho)) in history.iter().enumerate() {
        let beta = rho * dot(y, &q);
        q.iter_mut()
            .zip(s)
            .for_each(|(qv, sv)| *qv += (alphas[i] - beta) * sv);
    }
    q.iter_mut().for_each(|v| *v = -*v);
    q
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn minimises_rosenbrock() {
        let rosen = |x: &[f64]| {
            let (a, b) = (x[0], x[1]);
            let f = (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2);
            let g = vec![
                -2.0 * (1.0 - a) - 400.0 * a * (b - a * a),
                200.0 * (b - a * a),
            ];
            (f, g)
        };
        let m = lbfgs(rosen, vec![-1.2, 1.0], 500);
        assert!(
            (m.x[0] - 1.0).abs() < 1e-4 && (m.x[1] - 1.0).abs() < 1e-4,
            "{m:?}"
        );
    }
}

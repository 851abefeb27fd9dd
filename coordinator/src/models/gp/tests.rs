#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use nalgebra::{DMatrix, DVector};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::linalg::{Factor, cholesky_blocked};
use super::*;

fn points(n: usize, d: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..d).map(|_| rng.random_range(0.0..1.0)).collect())
        .collect()
}

fn smooth(x: &[f64]) -> f64 {
    (3.0 * x[0]).sin() + 0.5 * (2.0 * x[1]).cos() * x[0] + 2.0
}

fn hyper(d: usize) -> Hyperparameters {
    Hyperparameters {
        lengthscales: vec![0.4; d],
        signal_variance: 1.5,
        noise_variance: 1e-4,
        mean_offset: 0.3,
    }
}

#[test]
fn fitted_gp_interpolates_noise_free_data_and_generalises() {
    let xs = points(30, 2, 1);
    let ys: Vec<f64> = xs.iter().map(|x| smooth(x)).collect();
    let gp = Gp::fit(&xs, &ys, Arc::new(ZeroMean), &FitOptions::default()).unwrap();
    let p = gp.predict_batch(&xs).unwrap();
    for (i, y) in ys.iter().enumerate() {
        assert!((p.mean[i] - y).abs() < 1e-2, "at {i}: {} vs {y}", p.mean[i]);
    }
    let test = points(50, 2, 2);
    let p = gp.predict_batch(&test).unwrap();
    let rmse = (test
        .iter()
        .enumerate()
        .map(|(i, x)| (p.mean[i] - smooth(x)).powi(2))
        .sum::<f64>()
        / 50.0)
        .sqrt();
    assert!(
        rmse < 0.05,
        "held-out rmse {rmse}, {:?}",
        gp.hyperparameters()
    );
    // The mean-only path (screening) is the full prediction's mean.
    let means = gp.predict_mean_batch(&test).unwrap();
    for (i, m) in means.iter().enumerate() {
        assert!(
            (m - p.mean[i]).abs() < 1e-12,
            "at {i}: {m} vs {}",
            p.mean[i]
        );
    }
    assert!(gp.predict_mean_batch(&[vec![0.5]]).is_err());
}

#[test]
fn variance_shrinks_at_observed_points() {
    let xs = points(10, 3, 3);
    let ys: Vec<f64> = xs.iter().map(|x| smooth(x)).collect();
    let gp = Gp::new(&xs, &ys, Arc::new(ZeroMean), hyper(3)).unwrap();
    let observed = gp.predict_batch(&xs).unwrap();
    let far = gp.predict(&[5.0, 5.0, 5.0]).unwrap();
    assert!((far.variance - 1.5).abs() < 1e-9, "prior variance far away");
    assert!(
        (far.mean - 0.3).abs() < 1e-9,
        "prior mean + offset far away"
    );
    for v in observed.variance {
        assert!(v < 2e-4, "variance {v} at an observed point");
    }
}

#[test]
fn prior_mean_function_is_followed_away_from_data() {
    let xs = vec![vec![0.1], vec![0.2]];
    let ys = vec![10.0, 12.0];
    let slope: Arc<dyn MeanFn> = Arc::new(|x: &[f64]| 20.0 * x[0]);
    let h = Hyperparameters {
        lengthscales: vec![0.1],
        ..hyper(1)
    };
    let gp = Gp::new(&xs, &ys, slope, h).unwrap();
    let p = gp.predict(&[3.0]).unwrap();
    assert!((p.mean - (60.0 + 0.3)).abs() < 1e-9);
}

#[test]
fn lml_gradient_matches_finite_differences() {
    let d = 3;
    let xs = points(25, d, 4);
    let x = DMatrix::from_fn(25, d, |i, k| xs[i][k]);
    let z = DVector::from_iterator(25, xs.iter().map(|x| smooth(x) - 2.0));
    let p = vec![
        (0.3f64).ln(),
        (0.7f64).ln(),
        (1.4f64).ln(),
        0.2,
        (0.05f64).ln(),
    ];
    let (_, grad) = lml_with_gradient(&x, &z, &p).unwrap();
    for k in 0..p.len() {
        let h = 1e-5;
        let mut up = p.clone();
        up[k] += h;
        let mut down = p.clone();
        down[k] -= h;
        let fd = (lml_with_gradient(&x, &z, &up).unwrap().0
            - lml_with_gradient(&x, &z, &down).unwrap().0)
            / (2.0 * h);
        assert!(
            (fd - grad[k]).abs() < 1e-5 * fd.abs().max(1.0),
            "param {k}: analytic {} vs numeric {fd}",
            grad[k]
        );
    }
}

#[test]
fn gp_lml_matches_the_optimiser_objective() {
    let xs = points(15, 2, 9);
    let ys: Vec<f64> = xs.iter().map(|x| smooth(x)).collect();
    let h = Hyperparameters {
        mean_offset: 0.0,
        signal_variance: 1.0,
        ..hyper(2)
    };
    let gp = Gp::new(&xs, &ys, Arc::new(ZeroMean), h).unwrap();
    let x = DMatrix::from_fn(15, 2, |i, k| xs[i][k]);
    let z = DVector::from_vec(ys.clone());
    let p = vec![0.4f64.ln(), 0.4f64.ln(), 0.0, 1e-4f64.ln()];
    let (lml, _) = lml_with_gradient(&x, &z, &p).unwrap();
    assert!((lml - gp.log_marginal_likelihood()).abs() < 1e-8);
}

#[test]
fn rank_one_update_equals_refit() {
    let xs = points(40, 4, 5);
    let ys: Vec<f64> = xs.iter().map(|x| smooth(x)).collect();
    let mean: Arc<dyn MeanFn> = Arc::new(|x: &[f64]| x[3]);
    let mut updated = Gp::new(&xs[..35], &ys[..35], mean.clone(), hyper(4)).unwrap();
    for i in 35..40 {
        updated.add_observation(&xs[i], ys[i]).unwrap();
    }
    let refit = Gp::new(&xs, &ys, mean, hyper(4)).unwrap();
    let test = points(20, 4, 6);
    let (a, b) = (
        updated.predict_batch(&test).unwrap(),
        refit.predict_batch(&test).unwrap(),
    );
    for i in 0..20 {
        assert!((a.mean[i] - b.mean[i]).abs() < 1e-9);
        assert!((a.variance[i] - b.variance[i]).abs() < 1e-9);
    }
    assert!((updated.log_marginal_likelihood() - refit.log_marginal_likelihood()).abs() < 1e-8);
}

#[test]
fn duplicate_noise_free_points_are_handled_by_jitter() {
    let xs = vec![vec![0.5, 0.5]; 3];
    let ys = vec![1.0, 1.0, 1.0];
    let h = Hyperparameters {
        noise_variance: 0.0,
        ..hyper(2)
    };
    let mut gp = Gp::new(&xs, &ys, Arc::new(ZeroMean), h).unwrap();
    assert!(gp.jitter() > 0.0);
    gp.add_observation(&[0.5, 0.5], 1.0).unwrap();
    assert!((gp.predict(&[0.5, 0.5]).unwrap().mean - 1.0).abs() < 1e-3);
}

#[test]
fn conditioning_the_posterior_equals_adding_the_observation() {
    let xs = points(30, 3, 7);
    let ys: Vec<f64> = xs.iter().map(|x| smooth(x)).collect();
    let gp = Gp::new(&xs, &ys, Arc::new(ZeroMean), hyper(3)).unwrap();
    let cands = points(25, 3, 8);
    let mut post = gp.posterior(&cands).unwrap();
    let mut gp2 = gp.clone();
    for (j, y) in [(4, 1.7), (11, 2.9)] {
        post.condition(j, y);
        gp2.add_observation(&cands[j], y).unwrap();
    }
    let direct = gp2.predict_batch(&cands).unwrap();
    for i in 0..25 {
        assert!((post.mean()[i] - direct.mean[i]).abs() < 1e-9);
        assert!((post.variance()[i] - direct.variance[i]).abs() < 1e-9);
    }
}

/// A Hilbert-like matrix with a raised diagonal: positive definite, size off the block grid.
fn raised_hilbert(n: usize) -> DMatrix<f64> {
    DMatrix::from_fn(n, n, |i, j| {
        if i == j {
            2.0
        } else {
            1.0 / (1.0 + (i + j) as f64)
        }
    })
}

#[test]
fn blocked_triangular_solve_matches_substitution() {
    let n = 150;
    let a = raised_hilbert(n);
    let l = a.cholesky().unwrap().unpack();
    let b = DMatrix::from_fn(n, 100, |i, j| ((i * 7 + j) % 23) as f64 * 0.1 - 1.0);
    let fast = Factor::from_lower(l.clone())
        .unwrap()
        .solve_lower(b.clone());
    let slow = l.solve_lower_triangular(&b).unwrap();
    assert!((fast - slow).amax() < 1e-10);
}

#[test]
fn blocked_cholesky_matches_nalgebra_and_rejects_indefinite() {
    let n = 150;
    let a = raised_hilbert(n);
    let ours = cholesky_blocked(a.clone()).unwrap().l().clone();
    let theirs = a.clone().cholesky().unwrap().unpack();
    assert!((ours - theirs).amax() < 1e-12);
    let mut bad = a;
    bad[(100, 100)] = -1.0;
    assert!(cholesky_blocked(bad).is_none());
}

#[test]
fn mean_only_prediction_agrees_with_the_full_one() {
    let xs = points(40, 3, 11);
    let ys: Vec<f64> = xs.iter().map(|x| smooth(x) + x[2]).collect();
    let mean: Arc<dyn MeanFn> = Arc::new(|x: &[f64]| 0.5 * x[0]);
    let gp = Gp::new(&xs, &ys, mean, hyper(3)).unwrap();
    for x in points(20, 3, 12) {
        let full = gp.predict(&x).unwrap().mean;
        assert!((gp.predict_mean(&x).unwrap() - full).abs() < 1e-9);
    }
    assert!(gp.predict_mean(&[0.1, 0.2]).is_err());
}

/// Mean, variance and covariances by the textbook formulas (pointwise kernel, nalgebra's own
/// Cholesky, one solve per candidate): what the blocked, cached fast path must reproduce.
fn textbook(
    xs: &[Vec<f64>],
    ys: &[f64],
    h: &Hyperparameters,
    cands: &[Vec<f64>],
) -> (Vec<f64>, Vec<f64>, DMatrix<f64>) {
    let kern = Matern52::new(h.lengthscales.clone(), h.signal_variance);
    let n = xs.len();
    let k = DMatrix::from_fn(n, n, |i, j| {
        kern.eval(&xs[i], &xs[j]) + if i == j { h.noise_variance } else { 0.0 }
    });
    let chol = k.cholesky().unwrap();
    let alpha = chol.solve(&DVector::from_iterator(
        n,
        ys.iter().map(|y| y - h.mean_offset),
    ));
    let cross = DMatrix::from_fn(n, cands.len(), |i, j| kern.eval(&xs[i], &cands[j]));
    let solved = chol.solve(&cross);
    let cov = DMatrix::from_fn(cands.len(), cands.len(), |a, b| {
        kern.eval(&cands[a], &cands[b]) - cross.column(a).dot(&solved.column(b))
    });
    let mean = (0..cands.len())
        .map(|j| h.mean_offset + cross.column(j).dot(&alpha))
        .collect();
    let var = (0..cands.len()).map(|j| cov[(j, j)]).collect();
    (mean, var, cov)
}

#[test]
fn fast_prediction_equals_the_textbook_formulas() {
    let h = hyper(6);
    let all = points(140, 6, 11);
    let ys: Vec<f64> = all.iter().map(|x| smooth(x)).collect();
    // Many candidates take the blocked solve, few the plain substitution.
    for m in [100, 10] {
        let cands = points(m, 6, 12);
        // Sizes around the solve's 64-row blocks, reached by conditioning once and by growing
        // the factor one observation at a time (which extends the cached block inverses).
        let mut grown = Gp::new(&all[..60], &ys[..60], Arc::new(ZeroMean), h.clone()).unwrap();
        for n in 60..=140 {
            if n > 60 {
                grown.add_observation(&all[n - 1], ys[n - 1]).unwrap();
            }
            if ![60, 63, 64, 65, 127, 128, 129, 140].contains(&n) {
                continue;
            }
            let fresh = Gp::new(&all[..n], &ys[..n], Arc::new(ZeroMean), h.clone()).unwrap();
            let (mean, var, cov) = textbook(&all[..n], &ys[..n], &h, &cands);
            for gp in [&fresh, &grown] {
                assert_eq!(gp.jitter(), 0.0);
                let p = gp.predict_batch(&cands).unwrap();
                let post = gp.posterior(&cands).unwrap();
                for j in 0..m {
                    assert!((p.mean[j] - mean[j]).abs() < 1e-9, "n {n} m {m} mean {j}");
                    assert!((p.variance[j] - var[j]).abs() < 1e-9, "n {n} m {m} var {j}");
                    assert_eq!(post.mean()[j], p.mean[j]);
                }
                let with_3 = post.covariance_with(3);
                for (a, c) in with_3.iter().enumerate() {
                    assert!((c - cov[(a, 3)]).abs() < 1e-9, "n {n} m {m} cov {a}");
                }
            }
        }
    }
}

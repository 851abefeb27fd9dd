#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use super::*;
use crate::models::gp::{Gp, Hyperparameters, Posterior, Predictions, ZeroMean};

fn marginals(mean: Vec<f64>, variance: Vec<f64>) -> Posterior {
    Posterior::from_marginals(Predictions { mean, variance }, 0.0)
}

fn options() -> AcquisitionOptions {
    AcquisitionOptions::default()
}

#[test]
fn probability_of_feasibility_multiplies_constraints() {
    let c = vec![
        Constraint {
            posterior: marginals(vec![0.0, 1.0, 5.0], vec![1.0, 0.0, 0.0]),
            threshold: 0.0,
        },
        Constraint {
            posterior: marginals(vec![0.0, 0.0, 0.0], vec![4.0, 4.0, 0.0]),
            threshold: 0.0,
        },
    ];
    let p = probability_of_feasibility(&c, 3);
    assert!((p[0] - 0.25).abs() < 1e-12);
    assert_eq!(p[1], 0.0, "a surely violated constraint");
    assert_eq!(p[2], 0.0);
    assert_eq!(probability_of_feasibility(&[], 2), vec![1.0, 1.0]);
}

/// Two known objectives, one uncertain constraint, front {(1,1)} under reference (2,2).
fn known_cost_problem() -> AcquisitionProblem {
    AcquisitionProblem {
        objectives: vec![
            Objective::Known(vec![0.5, 0.5, 1.5, 0.2]),
            Objective::Known(vec![0.5, 0.5, 1.5, 1.8]),
        ],
        constraints: vec![Constraint {
            posterior: marginals(vec![0.0, 2.0, -5.0, -5.0], vec![1.0, 1.0, 0.0, 0.0]),
            threshold: 0.0,
        }],
        feasible_observed: vec![vec![1.0, 1.0]],
        reference: vec![2.0, 2.0],
        excluded: vec![],
    }
}

#[test]
fn constrained_ehvi_by_hand() {
    let (mode, scores) = score_candidates(&known_cost_problem(), &options()).unwrap();
    assert_eq!(mode, Mode::ImproveFront);
    let s: Vec<Choice> = scores.into_iter().flatten().collect();
    // Candidate 0: HVI of (0.5,0.5) is 1.25, PoF 0.5.
    assert!((s[0].ehvi - 1.25).abs() < 1e-12 && (s[0].score - 0.625).abs() < 1e-12);
    // Candidate 1: same point, PoF Φ(−2).
    assert!((s[1].score - 1.25 * 0.022_750_131_948_179).abs() < 1e-9);
    // Candidate 2 is dominated; candidate 3 (0.2,1.8) gains 0.8 · 0.2 = 0.16 surely.
    assert_eq!(s[2].score, 0.0);
    assert!((s[3].score - 0.16).abs() < 1e-12);
}

#[test]
fn batch_returns_distinct_allowed_candidates() {
    let mut problem = known_cost_problem();
    problem.excluded = vec![3];
    let batch = select_batch(problem.clone(), 3, &options()).unwrap();
    let mut idx: Vec<usize> = batch.iter().map(|c| c.index).collect();
    assert_eq!(idx[0], 0);
    idx.sort_unstable();
    assert_eq!(idx, vec![0, 1, 2]);
    assert_eq!(select_batch(problem, 10, &options()).unwrap().len(), 3);
}

#[test]
fn nothing_feasible_yet_maximises_probability_of_feasibility() {
    let mut problem = known_cost_problem();
    problem.feasible_observed.clear();
    problem.constraints[0].posterior =
        marginals(vec![50.0, 40.0, 45.0, 60.0], vec![1.0, 1.0, 1.0, 1.0]);
    let (mode, scores) = score_candidates(&problem, &options()).unwrap();
    assert_eq!(mode, Mode::FindFeasible);
    let best = scores
        .into_iter()
        .flatten()
        .max_by(|a, b| a.score.total_cmp(&b.score))
        .unwrap();
    // All PoF underflow to 0, yet the log-probability still ranks them.
    assert_eq!(best.index, 1);
    assert_eq!(best.probability_feasible, 0.0);
}

#[test]
fn kriging_believer_batch_spreads_out_with_a_gp() {
    // One modelled objective that is flat: without fantasies every pick would be the same
    // region; with them, the variance there collapses and the batch moves on.
    let xs: Vec<Vec<f64>> = vec![vec![0.0], vec![1.0]];
    let h = Hyperparameters {
        lengthscales: vec![0.15],
        signal_variance: 1.0,
        noise_variance: 1e-6,
        mean_offset: 0.0,
    };
    let gp = Gp::new(&xs, &[0.5, 0.5], Arc::new(ZeroMean), h).unwrap();
    let cands: Vec<Vec<f64>> = (0..41).map(|i| vec![i as f64 / 40.0]).collect();
    let problem = AcquisitionProblem {
        objectives: vec![
            Objective::Known(cands.iter().map(|c| 1.0 + c[0]).collect()),
            Objective::Modelled(gp.posterior(&cands).unwrap()),
        ],
        constraints: vec![],
        feasible_observed: vec![vec![1.0, 0.5], vec![2.0, 0.5]],
        reference: vec![3.0, 3.0],
        excluded: vec![0, 40],
    };
    let batch = select_batch(problem, 4, &options()).unwrap();
    let picks: Vec<usize> = batch.iter().map(|c| c.index).collect();
    for (a, i) in picks.iter().enumerate() {
        for j in &picks[a + 1..] {
            assert!(i.abs_diff(*j) >= 2, "picks {picks:?} cluster");
        }
    }
}

#[test]
fn three_objectives_use_monte_carlo_and_agree_with_the_box() {
    // Empty front, deterministic point (0.5,0.5,0.5) under (1,1,1): EHVI = 0.125 exactly.
    let problem = AcquisitionProblem {
        objectives: vec![
            Objective::Known(vec![0.5]),
            Objective::Known(vec![0.5]),
            Objective::Modelled(marginals(vec![0.5], vec![0.0])),
        ],
        constraints: vec![],
        feasible_observed: vec![],
        reference: vec![1.0, 1.0, 1.0],
        excluded: vec![],
    };
    let (_, s) = score_candidates(&problem, &options()).unwrap();
    let s = s[0].clone().unwrap();
    assert!((s.ehvi - 0.125).abs() < 1e-12);
}

#[test]
fn mismatched_sizes_are_errors() {
    let mut problem = known_cost_problem();
    problem.reference = vec![2.0];
    assert!(score_candidates(&problem, &options()).is_err());
    let mut problem = known_cost_problem();
    problem.objectives[0] = Objective::Known(vec![1.0]);
    assert!(select_batch(problem, 1, &options()).is_err());
}

//! The GP benches' shared workload: Hartmann-6 outcomes on random configurations, the 840-point
//! candidate lattice, and one decision split into its phases, so that the timing bench (`gp`)
//! and the instruction-count harness (`gp_callgrind`) measure exactly the same work.

#![allow(dead_code)] // each bench uses its own part

use demeter_coordinator::models::gp::{Gp, Posterior};
use demeter_coordinator::models::mobo::{
    AcquisitionOptions, AcquisitionProblem, Choice, Constraint, EnoughKnown, EnoughKnownOptions,
    Objective, enough_known, probability_of_feasibility, select_batch,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

pub const D: usize = 6;
/// Constraint thresholds of the three constrained outcomes (outcomes 1, 2, 3).
pub const THRESHOLDS: [f64; 3] = [1.0, 2.0, 2.5];

/// Hartmann-6, a standard smooth 6-D test function (negated: positive, one dominant peak).
pub fn hartmann6(x: &[f64]) -> f64 {
    const A: [[f64; 6]; 4] = [
        [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
        [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
        [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
        [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
    ];
    const P: [[f64; 6]; 4] = [
        [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
        [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
        [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
        [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
    ];
    const ALPHA: [f64; 4] = [1.0, 1.2, 3.0, 3.2];
    (0..4)
        .map(|i| {
            let e: f64 = (0..6).map(|j| A[i][j] * (x[j] - P[i][j]).powi(2)).sum();
            ALPHA[i] * (-e).exp()
        })
        .sum()
}

/// Outcome `k` of a configuration: shifted and scaled Hartmann plus small noise.
pub fn outcome(k: usize, x: &[f64], rng: &mut StdRng) -> f64 {
    let shifted: Vec<f64> = x.iter().map(|v| (v + 0.1 * k as f64) % 1.0).collect();
    hartmann6(&shifted) * (1.0 + k as f64) + 0.01 * rng.random_range(-1.0..1.0)
}

pub fn points(n: usize, rng: &mut StdRng) -> Vec<Vec<f64>> {
    (0..n)
        .map(|_| (0..D).map(|_| rng.random_range(0.0..1.0)).collect())
        .collect()
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A 7·5·4·3·2·1 = 840-point lattice, like a grid of (parallelism, slots, memory, CPU, …).
pub fn grid() -> Vec<Vec<f64>> {
    let levels = [7usize, 5, 4, 3, 2, 1];
    let mut out = vec![vec![]];
    for &l in &levels {
        out = out
            .into_iter()
            .flat_map(|p: Vec<f64>| {
                (0..l).map(move |i| {
                    let mut q = p.clone();
                    q.push(if l == 1 {
                        0.5
                    } else {
                        i as f64 / (l - 1) as f64
                    });
                    q
                })
            })
            .collect();
    }
    out
}

/// Memory, a known objective of each candidate.
pub fn memory(cands: &[Vec<f64>]) -> Vec<f64> {
    cands.iter().map(|c| 1.0 + c[1] + 2.0 * c[2]).collect()
}

/// Phase 1 of a decision: every GP's posterior over the candidates (with cross terms).
pub fn posteriors(gps: &[Gp], cands: &[Vec<f64>]) -> Vec<Posterior> {
    gps.iter()
        .map(|gp| match gp.posterior(cands) {
            Ok(p) => p,
            Err(e) => panic!("posterior: {e}"),
        })
        .collect()
}

/// What phase 2 hands to phase 3.
pub struct Acquired {
    pub batch: Vec<Choice>,
    pub pof: Vec<f64>,
    pub cpu_mean: Vec<f64>,
}

/// Phase 2: CPU use as a modelled objective (first posterior), memory known, the other
/// posteriors as constraints; q = 4 batch by Kriging believer.
pub fn acquire(mut posts: Vec<Posterior>, memory: &[f64], seed: u64) -> Acquired {
    let cpu = posts.remove(0);
    let constraints: Vec<Constraint> = posts
        .into_iter()
        .zip(THRESHOLDS)
        .map(|(posterior, threshold)| Constraint {
            posterior,
            threshold,
        })
        .collect();
    let pof = probability_of_feasibility(&constraints, memory.len());
    let observed: Vec<Vec<f64>> = (0..20)
        .map(|i| vec![cpu.mean()[i * 40], memory[i * 40]])
        .collect();
    let cpu_mean = cpu.mean().to_vec();
    let problem = AcquisitionProblem {
        objectives: vec![Objective::Modelled(cpu), Objective::Known(memory.to_vec())],
        constraints,
        feasible_observed: observed,
        reference: vec![10.0, 5.0],
        excluded: vec![],
    };
    let options = AcquisitionOptions {
        seed,
        ..Default::default()
    };
    let batch = match select_batch(problem, 4, &options) {
        Ok(b) => b,
        Err(e) => panic!("select_batch: {e}"),
    };
    Acquired {
        batch,
        pof,
        cpu_mean,
    }
}

/// Phase 3: the enough-known test on (CPU, memory) costs.
pub fn enough(acquired: &Acquired, memory: &[f64]) -> EnoughKnown {
    let costs: Vec<Vec<f64>> = acquired
        .cpu_mean
        .iter()
        .zip(memory)
        .map(|(c, m)| vec![*c, *m])
        .collect();
    enough_known(&costs, &acquired.pof, &EnoughKnownOptions::default())
}

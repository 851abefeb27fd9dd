//! Constrained MOBO vs Sobol vs uniform random on standard problems over a fixed discrete pool:
//! hypervolume of the feasible evaluated points after 10, 20 and 50 evaluations, mean ± sd
//! over seeds. Prints a table.
//!
//! `cargo bench -p demeter-coordinator --bench mobo`; `DEMETER_BENCH_QUICK=1` for a short run.

use std::sync::Arc;
use std::time::Instant;

use demeter_coordinator::models::gp::{FitOptions, Gp, ZeroMean};
use demeter_coordinator::models::mobo::problems::{Evaluation, TestProblem};
use demeter_coordinator::models::mobo::sobol::sobol_design_in_pool;
use demeter_coordinator::models::mobo::{
    AcquisitionOptions, AcquisitionProblem, Constraint, Objective, hypervolume, select_batch,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

type BoxError = Box<dyn std::error::Error>;

struct Settings {
    pool: usize,
    seeds: u64,
    budgets: Vec<usize>,
    problems: Vec<TestProblem>,
}

fn settings() -> Settings {
    let quick = std::env::var_os("DEMETER_BENCH_QUICK").is_some();
    let pool = std::env::var("DEMETER_BENCH_POOL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 512 } else { 2048 });
    let problems = vec![
        TestProblem::BraninCurrin,
        TestProblem::Zdt1 { d: 4 },
        TestProblem::Zdt2 { d: 4 },
        TestProblem::C2Dtlz2 { d: 4 },
    ];
    if quick {
        Settings {
            pool,
            seeds: 2,
            budgets: vec![10, 20],
            problems,
        }
    } else {
        Settings {
            pool,
            seeds: 10,
            budgets: vec![10, 20, 50],
            problems,
        }
    }
}

/// Hypervolume of the feasible points among the first `k` evaluations.
fn hv_after(evals: &[Evaluation], k: usize, reference: &[f64]) -> f64 {
    let feasible: Vec<Vec<f64>> = evals[..k.min(evals.len())]
        .iter()
        .filter(|e| e.feasible())
        .map(|e| e.objectives.clone())
        .collect();
    hypervolume(&feasible, reference)
}

fn mobo(
    problem: TestProblem,
    pool: &[Vec<f64>],
    truth: &[Evaluation],
    budget: usize,
    batch: usize,
    seed: u64,
) -> Result<Vec<Evaluation>, BoxError> {
    let initial = problem.dim() + 1;
    let mut chosen = sobol_design_in_pool(pool, initial, seed as u32)?;
    while chosen.len() < budget {
        let xs: Vec<Vec<f64>> = chosen.iter().map(|&i| pool[i].clone()).collect();
        let fit = |values: Vec<f64>, k: u64| -> Result<Gp, BoxError> {
            let options = FitOptions {
                restarts: 2,
                max_iters: 60,
                seed: seed * 1000 + chosen.len() as u64 * 10 + k,
                ..FitOptions::default()
            };
            Ok(Gp::fit(&xs, &values, Arc::new(ZeroMean), &options)?)
        };
        let mut objectives = Vec::new();
        for o in 0..2 {
            let gp = fit(
                chosen.iter().map(|&i| truth[i].objectives[o]).collect(),
                o as u64,
            )?;
            objectives.push(Objective::Modelled(gp.posterior(pool)?));
        }
        let mut constraints = Vec::new();
        for c in 0..problem.constraints() {
            let gp = fit(
                chosen.iter().map(|&i| truth[i].constraints[c]).collect(),
                5 + c as u64,
            )?;
            constraints.push(Constraint {
                posterior: gp.posterior(pool)?,
                threshold: 0.0,
            });
        }
        let acquisition = AcquisitionProblem {
            objectives,
            constraints,
            feasible_observed: chosen
                .iter()
                .filter(|&&i| truth[i].feasible())
                .map(|&i| truth[i].objectives.clone())
                .collect(),
            reference: problem.reference(),
            excluded: chosen.clone(),
        };
        let options = AcquisitionOptions {
            seed,
            ..Default::default()
        };
        let picks = select_batch(acquisition, batch.min(budget - chosen.len()), &options)?;
        if picks.is_empty() {
            break;
        }
        chosen.extend(picks.iter().map(|c| c.index));
    }
    Ok(chosen.iter().map(|&i| truth[i].clone()).collect())
}

fn mean_sd(v: &[f64]) -> String {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt();
    format!("{mean:8.3} ± {sd:6.3}")
}

fn main() -> Result<(), BoxError> {
    let s = settings();
    let budget = *s.budgets.iter().max().unwrap_or(&10);
    println!(
        "MOBO benchmark: pool of {} uniform random candidates per problem (fixed seed), {} seeds, \
         initial design d+1 Sobol points, GP hyperparameters refitted before every batch; \
         MOBO picks q = 1, MOBO q=4 picks batches of 4 (Kriging believer)",
        s.pool, s.seeds
    );
    print!("{:<32} {:<9}", "problem", "method");
    for b in &s.budgets {
        print!(" {:>17}", format!("HV after {b}"));
    }
    println!();
    for problem in &s.problems {
        let mut rng = StdRng::seed_from_u64(2026);
        let pool: Vec<Vec<f64>> = (0..s.pool)
            .map(|_| {
                (0..problem.dim())
                    .map(|_| rng.random_range(0.0..1.0))
                    .collect()
            })
            .collect();
        let truth: Vec<Evaluation> = pool.iter().map(|x| problem.evaluate(x)).collect();
        let reference = problem.reference();
        let best = hv_after(&truth, truth.len(), &reference);
        let feasible = truth.iter().filter(|e| e.feasible()).count();
        let started = Instant::now();
        let mut results: Vec<(&str, Vec<Vec<f64>>)> = Vec::new();
        for method in ["MOBO", "MOBO q=4", "Sobol", "random"] {
            let mut per_budget = vec![Vec::new(); s.budgets.len()];
            for seed in 0..s.seeds {
                let evals: Vec<Evaluation> = match method {
                    "MOBO" => mobo(*problem, &pool, &truth, budget, 1, seed)?,
                    "MOBO q=4" => mobo(*problem, &pool, &truth, budget, 4, seed)?,
                    "Sobol" => sobol_design_in_pool(&pool, budget, seed as u32)?
                        .into_iter()
                        .map(|i| truth[i].clone())
                        .collect(),
                    _ => {
                        let mut r = StdRng::seed_from_u64(seed + 7919);
                        rand::seq::index::sample(&mut r, pool.len(), budget)
                            .into_iter()
                            .map(|i| truth[i].clone())
                            .collect()
                    }
                };
                for (slot, &b) in s.budgets.iter().enumerate() {
                    per_budget[slot].push(hv_after(&evals, b, &reference));
                }
            }
            results.push((method, per_budget));
        }
        for (method, per_budget) in results {
            print!("{:<32} {:<9}", problem.name(), method);
            for v in &per_budget {
                print!(" {}", mean_sd(v));
            }
            println!();
        }
        println!(
            "{:<32} pool's best HV {best:.3} ({feasible} of {} feasible), {:.1} s",
            "",
            pool.len(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

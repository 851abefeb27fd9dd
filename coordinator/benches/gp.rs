//! GP timings: fit (with hyperparameter optimisation), batch prediction over a configuration
//! grid, one-observation update, and one whole decision at n = 500. Prints a table.
//!
//! `cargo bench -p demeter-coordinator --bench gp`; `DEMETER_BENCH_QUICK=1` for a short run.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use demeter_coordinator::models::gp::{FitOptions, Gp, ZeroMean};
use demeter_coordinator::models::mobo::{
    AcquisitionOptions, AcquisitionProblem, Constraint, EnoughKnownOptions, Objective,
    enough_known, probability_of_feasibility, select_batch,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const D: usize = 6;

/// Hartmann-6, a standard smooth 6-D test function (negated: positive, one dominant peak).
fn hartmann6(x: &[f64]) -> f64 {
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
fn outcome(k: usize, x: &[f64], rng: &mut StdRng) -> f64 {
    let shifted: Vec<f64> = x.iter().map(|v| (v + 0.1 * k as f64) % 1.0).collect();
    hartmann6(&shifted) * (1.0 + k as f64) + 0.01 * rng.random_range(-1.0..1.0)
}

fn points(n: usize, rng: &mut StdRng) -> Vec<Vec<f64>> {
    (0..n)
        .map(|_| (0..D).map(|_| rng.random_range(0.0..1.0)).collect())
        .collect()
}

/// A 7·5·4·3·2·1 = 840-point lattice, like a grid of (parallelism, slots, memory, CPU, …).
fn grid() -> Vec<Vec<f64>> {
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

/// CPU time of this thread: the machine is shared with other builds, so wall time overstates
/// what one core needs.
fn cpu_now() -> Duration {
    cpu_time::ThreadTime::now().as_duration()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..reps)
            .map(|_| {
                let t = cpu_now();
                black_box(f());
                cpu_now() - t
            })
            .collect(),
    )
}

fn ms(d: Duration) -> String {
    format!("{:9.3}", d.as_secs_f64() * 1e3)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::var_os("DEMETER_BENCH_QUICK").is_some();
    let reps = if quick { 2 } else { 5 };
    let sizes: &[usize] = if quick { &[50, 200] } else { &[50, 200, 1000] };
    let cands = grid();
    let mut rng = StdRng::seed_from_u64(42);
    let options = FitOptions::default();

    println!(
        "GP benchmark: d = {D}, {} candidates, median of {reps} runs, thread CPU time (ms)",
        cands.len()
    );
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "n", "fit+hyper", "fit fixed", "predict", "update", "rmse"
    );
    let decision_only = std::env::var_os("DEMETER_BENCH_DECISION_ONLY").is_some();
    for &n in sizes.iter().filter(|_| !decision_only) {
        let xs = points(n, &mut rng);
        let ys: Vec<f64> = xs.iter().map(|x| outcome(0, x, &mut rng)).collect();
        let fit_reps = if n >= 1000 { 1.max(reps / 2) } else { reps };
        let fit = time(fit_reps, || Gp::fit(&xs, &ys, Arc::new(ZeroMean), &options));
        let gp = Gp::fit(&xs, &ys, Arc::new(ZeroMean), &options)?;
        let hyper = gp.hyperparameters().clone();
        let fixed = time(reps, || {
            Gp::new(&xs, &ys, Arc::new(ZeroMean), hyper.clone())
        });
        let predict = time(reps, || gp.predict_batch(&cands));
        let extra = points(reps, &mut rng);
        let mut updates = Vec::new();
        for x in &extra {
            let mut g = gp.clone();
            let y = outcome(0, x, &mut rng);
            let t = cpu_now();
            g.add_observation(x, y)?;
            updates.push(cpu_now() - t);
        }
        let test = points(200, &mut rng);
        let p = gp.predict_batch(&test)?;
        let rmse = (test
            .iter()
            .enumerate()
            .map(|(i, x)| (p.mean[i] - hartmann6(x)).powi(2))
            .sum::<f64>()
            / test.len() as f64)
            .sqrt();
        println!(
            "{n:>6} {} {} {} {} {:10.4}",
            ms(fit),
            ms(fixed),
            ms(predict),
            ms(median(updates)),
            rmse
        );
    }

    // One decision at n = 500: 4 GP outcomes (CPU use as a modelled objective, 3 constraints:
    // throughput shortfall, latency, recovery), memory a known objective, q = 4 batch plus the
    // enough-known test. Hyperparameters are reused (GPs conditioned beforehand).
    let n = 500;
    let xs = points(n, &mut rng);
    let mut gps = Vec::new();
    for k in 0..4 {
        let ys: Vec<f64> = xs.iter().map(|x| outcome(k, x, &mut rng)).collect();
        gps.push(Gp::fit(&xs, &ys, Arc::new(ZeroMean), &options)?);
    }
    let memory: Vec<f64> = cands.iter().map(|c| 1.0 + c[1] + 2.0 * c[2]).collect();
    let thresholds = [1.0, 2.0, 2.5];
    let mut phases = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut walls = Vec::new();
    let decisions = if quick { 3 } else { 11 };
    let mut last = None;
    for seed in 0..decisions {
        let wall = Instant::now();
        let t0 = cpu_now();
        let mut posts = Vec::new();
        for gp in &gps {
            posts.push(gp.posterior(&cands)?);
        }
        let t1 = cpu_now();
        let cpu = posts.remove(0);
        let constraints: Vec<Constraint> = posts
            .into_iter()
            .zip(thresholds)
            .map(|(posterior, threshold)| Constraint {
                posterior,
                threshold,
            })
            .collect();
        let pof = probability_of_feasibility(&constraints, cands.len());
        let observed: Vec<Vec<f64>> = (0..20)
            .map(|i| vec![cpu.mean()[i * 40], memory[i * 40]])
            .collect();
        let problem = AcquisitionProblem {
            objectives: vec![
                Objective::Modelled(cpu.clone()),
                Objective::Known(memory.clone()),
            ],
            constraints,
            feasible_observed: observed,
            reference: vec![10.0, 5.0],
            excluded: vec![],
        };
        let batch = select_batch(
            problem,
            4,
            &AcquisitionOptions {
                seed,
                ..Default::default()
            },
        )?;
        let t2 = cpu_now();
        let costs: Vec<Vec<f64>> = (0..cands.len())
            .map(|i| vec![cpu.mean()[i], memory[i]])
            .collect();
        let enough = enough_known(&costs, &pof, &EnoughKnownOptions::default());
        let t3 = cpu_now();
        phases[0].push(t1 - t0);
        phases[1].push(t2 - t1);
        phases[2].push(t3 - t2);
        phases[3].push(t3 - t0);
        walls.push(wall.elapsed());
        last = Some((batch, enough));
    }
    let [predict, acquire, enough, total] = phases.map(median);
    println!();
    println!(
        "One decision at n = {n}, {} candidates, 4 GPs, q = 4 (median of {decisions}, CPU ms):",
        cands.len()
    );
    println!(
        "  predict 4 GPs (posterior incl. cross terms) {}",
        ms(predict)
    );
    println!(
        "  acquisition + batch selection (q = 4, KB)   {}",
        ms(acquire)
    );
    println!(
        "  enough-known test                           {}",
        ms(enough)
    );
    println!(
        "  whole decision                              {}   (target ≤ 50 ms)",
        ms(total)
    );
    if let Some((batch, enough)) = last {
        let picks: Vec<usize> = batch.iter().map(|c| c.index).collect();
        println!(
            "  last decision: picks {picks:?} ({:?}), miss probability {:.3}, enough = {}",
            batch.first().map(|c| c.mode),
            enough.miss_probability,
            enough.enough
        );
    }
    Ok(())
}

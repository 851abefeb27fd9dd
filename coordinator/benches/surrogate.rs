//! Must-show "surrogate accuracy": plain GP vs physics-informed GP (and the physics prior alone),
//! trained on noisy observations of a simulated ground-truth job (random configurations at random
//! rates), scored on held-out configurations at held-out rates against the noiseless truth.
//! A second job with perturbed true curves checks that the priors' fitted scalars generalise.
//!
//! `cargo bench -p demeter-coordinator --bench surrogate` (full: n = 20/50/100, 5 seeds);
//! `DEMETER_BENCH_QUICK=1` for a short run (n = 20/50, 2 seeds).
//!
//! Columns: feasibility accuracy at P ≥ 0.5 (mean ± sd over seeds); `false ok`: truly infeasible
//! points called feasible at P ≥ 0.5; `false@.9` / `found@.9`: the same, and the share of truly
//! feasible points recognised, at the confidence a policy would demand (P ≥ 0.9; the physics
//! prior alone has no uncertainty, so its 0.5 and 0.9 columns agree); latency log-RMSE over all
//! points and where the job keeps up (ρ < 1); recovery log-RMSE; fit time (release, one core,
//! shared machine).

use std::collections::HashSet;
use std::time::Instant;

use demeter_coordinator::models::physics::PhysicsPrior;
use demeter_coordinator::models::space::{JobConfig, SearchSpace};
use demeter_coordinator::models::surrogate::{PriorMean, Qos, Surrogate, fit_options};
use demeter_coordinator::twin::truth::GroundTruth;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Confidence a policy would demand before switching to a configuration.
const SURE: f64 = 0.9;

const QOS: Qos = Qos {
    latency_p95_ms: 500.0,
    recovery_s: 180.0,
};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Method {
    PlainGp,
    PhysicsOnly,
    PhysicsGp,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::PlainGp => "plain GP",
            Method::PhysicsOnly => "physics prior only",
            Method::PhysicsGp => "physics + GP",
        }
    }
}

/// Scores of one method on one test set.
#[derive(Debug, Default, Clone, Copy)]
struct Score {
    accuracy: f64,
    /// Share of truly infeasible test points predicted feasible (the costly mistake: QoS misses).
    false_feasible: f64,
    /// The same at the policy's confidence (P(feasible) ≥ 0.9).
    sure_false_feasible: f64,
    /// Share of truly feasible points predicted feasible with P ≥ 0.9 (savings the model can see).
    sure_found: f64,
    latency_log_rmse: f64,
    /// Same, only where the true utilisation is below 1 (where the decisions are made).
    latency_log_rmse_stable: f64,
    recovery_log_rmse: f64,
    fit_ms: f64,
}

/// Predicted (p95 latency ms, recovery s, probability of feasibility) at a test point.
type Predictor = dyn Fn(&TestPoint) -> (f64, f64, f64);

struct TestPoint {
    config: JobConfig,
    rate: f64,
    latency_ms: f64,
    recovery_s: f64,
    stable: bool,
    feasible: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::var("DEMETER_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (sizes, seeds, tests): (&[usize], u64, usize) = if quick {
        (&[20, 50], 2, 200)
    } else {
        (&[20, 50, 100], 5, 400)
    };
    // Rate ranges span each job's range of capacities across the grid, so both feasible and
    // infeasible points are common (the share is printed).
    let jobs = [
        (
            "base",
            include_str!("../testdata/twin.toml"),
            (2_000.0, 32_000.0),
        ),
        (
            "perturbed",
            include_str!("../testdata/twin-perturbed.toml"),
            (1_000.0, 20_000.0),
        ),
    ];
    let space = SearchSpace::default();
    let candidates = space.candidates();
    println!(
        "surrogate accuracy: {} candidates, QoS p95 ≤ {} ms and recovery ≤ {} s, {seeds} seeds, {tests} held-out points{}",
        candidates.len(),
        QOS.latency_p95_ms,
        QOS.recovery_s,
        if quick { " (quick)" } else { "" }
    );
    println!(
        "{:<10} {:>4}  {:<19} {:>13} {:>10} {:>10} {:>10} {:>11} {:>9} {:>11} {:>7}",
        "job",
        "n",
        "method",
        "feas. acc",
        "false ok",
        "false@.9",
        "found@.9",
        "lat logRMSE",
        "lat(ρ<1)",
        "rec logRMSE",
        "fit ms"
    );
    for (job, toml, rates) in jobs {
        let truth = GroundTruth::from_toml(toml)?;
        for &n in sizes {
            let mut scores: Vec<(Method, Vec<Score>)> =
                [Method::PlainGp, Method::PhysicsOnly, Method::PhysicsGp]
                    .into_iter()
                    .map(|m| (m, Vec::new()))
                    .collect();
            let mut feasible_share = 0.0;
            for seed in 0..seeds {
                let mut rng = StdRng::seed_from_u64(1000 * seed + n as u64);
                let train = truth.sample(&candidates, rates, n, &mut rng);
                let trained: HashSet<JobConfig> = train.iter().map(|o| o.config).collect();
                let held_out: Vec<JobConfig> = candidates
                    .iter()
                    .copied()
                    .filter(|c| !trained.contains(c))
                    .collect();
                let test = test_points(&truth, &held_out, rates, tests, &mut rng);
                feasible_share +=
                    test.iter().filter(|t| t.feasible).count() as f64 / test.len() as f64;
                let options = fit_options(seed);
                for (method, out) in &mut scores {
                    let started = Instant::now();
                    let predict: Box<Predictor> = match method {
                        Method::PhysicsOnly => {
                            let prior = PhysicsPrior::fit(&train);
                            Box::new(move |t: &TestPoint| {
                                let lat = prior.latency_ms(&t.config, t.rate);
                                let rec = prior.recovery_s(&t.config, t.rate);
                                let ok = lat <= QOS.latency_p95_ms && rec <= QOS.recovery_s;
                                (lat, rec, if ok { 1.0 } else { 0.0 })
                            })
                        }
                        Method::PlainGp | Method::PhysicsGp => {
                            let prior = if *method == Method::PlainGp {
                                PriorMean::Plain
                            } else {
                                PriorMean::Physics
                            };
                            let model = Surrogate::fit(&space, &train, prior, &options)?;
                            Box::new(
                                move |t: &TestPoint| match model.predict(&t.config, t.rate) {
                                    Ok(p) => (
                                        p.latency_p95_ms.median(),
                                        p.recovery_s.median(),
                                        p.p_feasible(&QOS),
                                    ),
                                    Err(_) => (f64::NAN, f64::NAN, 0.0),
                                },
                            )
                        }
                    };
                    let fit_ms = started.elapsed().as_secs_f64() * 1e3;
                    out.push(score(&test, predict.as_ref(), fit_ms));
                }
            }
            println!(
                "{:<10} {:>4}  ({:.0}% of held-out points truly feasible)",
                job,
                n,
                100.0 * feasible_share / seeds as f64
            );
            for (method, runs) in &scores {
                let mean =
                    |f: fn(&Score) -> f64| runs.iter().map(f).sum::<f64>() / runs.len() as f64;
                let sd = |f: fn(&Score) -> f64| {
                    let m = mean(f);
                    (runs.iter().map(|s| (f(s) - m).powi(2)).sum::<f64>() / runs.len() as f64)
                        .sqrt()
                };
                println!(
                    "{:<10} {:>4}  {:<19} {:>6.1}%±{:>4.1} {:>9.1}% {:>9.1}% {:>9.1}% {:>11.3} {:>9.3} {:>11.3} {:>7.0}",
                    "",
                    n,
                    method.name(),
                    100.0 * mean(|s| s.accuracy),
                    100.0 * sd(|s| s.accuracy),
                    100.0 * mean(|s| s.false_feasible),
                    100.0 * mean(|s| s.sure_false_feasible),
                    100.0 * mean(|s| s.sure_found),
                    mean(|s| s.latency_log_rmse),
                    mean(|s| s.latency_log_rmse_stable),
                    mean(|s| s.recovery_log_rmse),
                    mean(|s| s.fit_ms),
                );
            }
        }
    }
    Ok(())
}

fn test_points(
    truth: &GroundTruth,
    configs: &[JobConfig],
    rates: (f64, f64),
    n: usize,
    rng: &mut StdRng,
) -> Vec<TestPoint> {
    (0..n)
        .map(|_| {
            let config = configs[rng.random_range(0..configs.len())];
            let rate = rng.random_range(rates.0..=rates.1);
            let t = truth.outcomes(&config, rate);
            TestPoint {
                config,
                rate,
                latency_ms: t.latency_p95_ms,
                recovery_s: t.recovery_s,
                stable: rate < t.capacity,
                feasible: t.latency_p95_ms <= QOS.latency_p95_ms && t.recovery_s <= QOS.recovery_s,
            }
        })
        .collect()
}

fn score(test: &[TestPoint], predict: &Predictor, fit_ms: f64) -> Score {
    let (mut correct, mut infeasible, mut false_feasible) = (0usize, 0usize, 0usize);
    let (mut sure_false, mut sure_found) = (0usize, 0usize);
    let (mut lat, mut lat_stable, mut stable, mut rec) = (0.0, 0.0, 0usize, 0.0);
    for t in test {
        let (latency, recovery, probability) = predict(t);
        let (feasible, sure) = (probability >= 0.5, probability >= SURE);
        correct += usize::from(feasible == t.feasible);
        if t.feasible {
            sure_found += usize::from(sure);
        } else {
            infeasible += 1;
            false_feasible += usize::from(feasible);
            sure_false += usize::from(sure);
        }
        let e = (latency / t.latency_ms).ln().powi(2);
        lat += e;
        if t.stable {
            lat_stable += e;
            stable += 1;
        }
        rec += (recovery / t.recovery_s).ln().powi(2);
    }
    let n = test.len() as f64;
    Score {
        accuracy: correct as f64 / n,
        false_feasible: false_feasible as f64 / infeasible.max(1) as f64,
        sure_false_feasible: sure_false as f64 / infeasible.max(1) as f64,
        sure_found: sure_found as f64 / (test.len() - infeasible).max(1) as f64,
        latency_log_rmse: (lat / n).sqrt(),
        latency_log_rmse_stable: (lat_stable / stable.max(1) as f64).sqrt(),
        recovery_log_rmse: (rec / n).sqrt(),
        fit_ms,
    }
}

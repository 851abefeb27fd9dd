use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::twin::truth::GroundTruth;

const QOS: Qos = Qos {
    latency_p95_ms: 500.0,
    recovery_s: 180.0,
};

fn truth() -> GroundTruth {
    GroundTruth::from_toml(include_str!("../../testdata/twin.toml")).unwrap()
}

fn training(n: usize, seed: u64) -> (SearchSpace, Vec<Observation>) {
    let space = SearchSpace::default();
    let observations = truth().sample(
        &space.candidates(),
        (2_000.0, 40_000.0),
        n,
        &mut StdRng::seed_from_u64(seed),
    );
    (space, observations)
}

fn quick_options() -> FitOptions {
    FitOptions {
        restarts: 1,
        max_iters: 40,
        ..fit_options(0)
    }
}

#[test]
fn normal_cdf_matches_known_values() {
    assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
    assert!((normal_cdf(1.0) - 0.841_344_746).abs() < 1e-6);
    assert!((normal_cdf(-1.959_963_985) - 0.025).abs() < 1e-6);
    assert!(normal_cdf(-40.0) >= 0.0 && normal_cdf(40.0) <= 1.0);
}

#[test]
fn physics_surrogate_predicts_held_out_configs() {
    let (space, observations) = training(60, 1);
    let model =
        Surrogate::fit(&space, &observations, PriorMean::Physics, &quick_options()).unwrap();
    let truth = truth();
    let mut rng = StdRng::seed_from_u64(99);
    let held_out = truth.sample(&space.candidates(), (2_000.0, 40_000.0), 100, &mut rng);
    let (mut squared, mut n, mut agree) = (0.0, 0, 0);
    for o in &held_out {
        let real = truth.outcomes(&o.config, o.rate);
        let predicted = model.predict(&o.config, o.rate).unwrap();
        if o.rate < 0.9 * real.capacity {
            squared += (predicted.latency_p95_ms.median() / real.latency_p95_ms)
                .ln()
                .powi(2);
            n += 1;
        }
        let feasible =
            real.latency_p95_ms <= QOS.latency_p95_ms && real.recovery_s <= QOS.recovery_s;
        agree += usize::from((predicted.p_feasible(&QOS) >= 0.5) == feasible);
    }
    let rmse = (squared / f64::from(n)).sqrt();
    assert!(rmse < 0.4, "latency log-RMSE {rmse} on {n} stable points");
    assert!(agree >= 80, "feasibility right on {agree} of 100");
}

#[test]
fn snapshot_rebuilds_the_same_model() {
    let (space, observations) = training(25, 2);
    for prior in [PriorMean::Physics, PriorMean::Plain] {
        let model = Surrogate::fit(&space, &observations, prior, &quick_options()).unwrap();
        let json = serde_json::to_string(&model.snapshot()).unwrap();
        let back = Surrogate::from_snapshot(&serde_json::from_str(&json).unwrap()).unwrap();
        let configs = space.candidates();
        let a = model.predict_many(&configs[..50], 15_000.0).unwrap();
        let b = back.predict_many(&configs[..50], 15_000.0).unwrap();
        for (a, b) in a.iter().zip(&b) {
            assert!((a.latency_p95_ms.log_mean - b.latency_p95_ms.log_mean).abs() < 1e-9);
            assert!((a.recovery_s.log_sd - b.recovery_s.log_sd).abs() < 1e-9);
        }
    }
}

#[test]
fn outcomes_without_data_fall_back_to_an_uncertain_prior() {
    let (space, mut observations) = training(20, 3);
    for o in &mut observations {
        o.recovery_s = None;
    }
    let model =
        Surrogate::fit(&space, &observations, PriorMean::Physics, &quick_options()).unwrap();
    let config = JobConfig::paper_default();
    let p = model.predict(&config, 10_000.0).unwrap();
    assert_eq!(p.recovery_s.log_sd, UNFITTED_LOG_SD);
    assert!((p.recovery_s.median() - model.physics().recovery_s(&config, 10_000.0)).abs() < 1e-6);
    assert!(p.latency_p95_ms.log_sd < UNFITTED_LOG_SD);
}

#[test]
fn pareto_keeps_only_feasible_undominated_configs() {
    let sure = Estimate {
        log_mean: 1.0,
        log_sd: 0.01,
    };
    let hopeless = Estimate {
        log_mean: 20.0,
        log_sd: 0.01,
    };
    let prediction = |text: &str, latency: Estimate| ConfigPrediction {
        config: text.parse().unwrap(),
        rate: 1.0,
        capacity: sure,
        latency_p95_ms: latency,
        recovery_s: sure,
    };
    let predictions = [
        prediction("p=8,slots=4,mem=1g,cpu=1,ckpt=30", hopeless), // cheapest but infeasible
        prediction("p=8,slots=2,mem=2g,cpu=1,ckpt=30", sure),     // 4 cores, 8 GB
        prediction("p=8,slots=2,mem=2g,cpu=1,ckpt=90", sure),     // same cost: deduplicated
        prediction("p=8,slots=4,mem=4g,cpu=3,ckpt=30", sure),     // 6 cores, 8 GB: dominated
        prediction("p=8,slots=4,mem=1g,cpu=3,ckpt=30", sure),     // 6 cores, 2 GB
    ];
    let front = feasible_pareto(&predictions, &QOS, 0.9);
    let names: Vec<String> = front.iter().map(|p| p.config.to_string()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(front[0].total_cpu_cores(), 4.0);
    assert_eq!(front[1].total_memory_mb(), 2048.0);
}

#[test]
fn scratch_diag() {
    let truth = truth();
    for seed in [1, 2] {
    let (space, observations) = training(60, seed);
    for prior in [PriorMean::Physics, PriorMean::Plain] {
        let model = Surrogate::fit(&space, &observations, prior, &fit_options(0)).unwrap();
        for (name, h) in ["cap", "lat", "rec"].iter().zip(model.snapshot().hyperparameters) { if let Some(h) = h { println!("{name} {:?} sd {:.3} noise {:.3} off {:.2}", h.lengthscales.iter().map(|l| format!("{l:.2}")).collect::<Vec<_>>(), h.signal_variance.sqrt(), h.noise_variance.sqrt(), h.mean_offset); } }
        let mut rng = StdRng::seed_from_u64(99);
        let held_out = truth.sample(&space.candidates(), (2_000.0, 40_000.0), 200, &mut rng);
        let (mut e_gp, mut e_prior, mut e_cap, mut e_capprior, mut n) = (0.0, 0.0, 0.0, 0.0, 0);
        for o in &held_out {
            let real = truth.outcomes(&o.config, o.rate);
            if o.rate > 0.9 * real.capacity { continue; }
            let p = model.predict(&o.config, o.rate).unwrap();
            let pr = model.physics().latency_ms(&o.config, o.rate);
            e_gp += (p.latency_p95_ms.median() / real.latency_p95_ms).ln().powi(2);
            e_prior += (pr / real.latency_p95_ms).ln().powi(2);
            e_cap += (p.capacity.median() / real.capacity).ln().powi(2);
            e_capprior += (model.physics().capacity(&o.config) / real.capacity).ln().powi(2);
            n += 1;
        }
        let r = |e: f64| (e / n as f64).sqrt();
        println!("seed {seed} {prior:?}: n {n} lat gp {:.3} prior {:.3} | cap gp {:.3} prior {:.3}", r(e_gp), r(e_prior), r(e_cap), r(e_capprior));
    }
    }
}

#![allow(clippy::unwrap_used)]

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::twin::truth::GroundTruth;

const QOS: Qos = Qos {
    latency_p95_ms: 500.0,
    recovery_s: 180.0,
};

fn truth() -> GroundTruth {
    GroundTruth::from_toml(include_str!("../../../testdata/twin.toml")).unwrap()
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

/// Latency error (log-RMSE) where the job keeps up, and feasibility agreement, on held-out
/// configurations and rates.
fn held_out_scores(model: &Surrogate) -> (f64, usize) {
    let truth = truth();
    let mut rng = StdRng::seed_from_u64(99);
    let held_out = truth.sample(
        &model.space().candidates(),
        (2_000.0, 40_000.0),
        100,
        &mut rng,
    );
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
    ((squared / f64::from(n)).sqrt(), agree)
}

#[test]
fn physics_surrogate_predicts_held_out_configs_better_than_plain() {
    let (space, observations) = training(60, 1);
    let physics =
        Surrogate::fit(&space, &observations, PriorMean::Physics, &quick_options()).unwrap();
    let plain = Surrogate::fit(&space, &observations, PriorMean::Plain, &quick_options()).unwrap();
    let (physics_rmse, physics_agree) = held_out_scores(&physics);
    let (plain_rmse, _) = held_out_scores(&plain);
    assert!(physics_rmse < 0.7, "latency log-RMSE {physics_rmse}");
    assert!(
        physics_rmse < plain_rmse,
        "physics {physics_rmse} vs plain {plain_rmse}"
    );
    assert!(
        physics_agree >= 80,
        "feasibility right on {physics_agree} of 100"
    );
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

/// Production before any profiling: one configuration at many rates.
fn production_only() -> (SearchSpace, Vec<Observation>) {
    let space = SearchSpace::default();
    let observations = truth().sample(
        &[JobConfig::paper_default()],
        (2_000.0, 30_000.0),
        30,
        &mut StdRng::seed_from_u64(4),
    );
    (space, observations)
}

#[test]
fn production_alone_leaves_other_shapes_uncertain() {
    let (space, observations) = production_only();
    let model = Surrogate::fit(&space, &observations, PriorMean::Physics, &fit_options(0)).unwrap();
    let measured = model
        .predict(&JobConfig::paper_default(), 10_000.0)
        .unwrap();
    let far: JobConfig = "p=16,slots=4,mem=1g,cpu=1,ckpt=30".parse().unwrap();
    let unmeasured = model.predict(&far, 10_000.0).unwrap();
    assert!(
        unmeasured.capacity.log_sd >= 0.25,
        "capacity of a shape never run: ±{}",
        unmeasured.capacity.log_sd
    );
    assert!(
        unmeasured.capacity.log_sd > 2.0 * measured.capacity.log_sd,
        "unmeasured ±{} vs measured ±{}",
        unmeasured.capacity.log_sd,
        measured.capacity.log_sd
    );
}

#[test]
fn a_drowned_copy_caps_the_capacity_of_its_shape() {
    let (space, mut observations) = production_only();
    let drowned: JobConfig = "p=16,slots=4,mem=1g,cpu=1,ckpt=30".parse().unwrap();
    let before = Surrogate::fit(&space, &observations, PriorMean::Physics, &fit_options(0))
        .unwrap()
        .predict(&drowned, 20_000.0)
        .unwrap()
        .capacity
        .median();
    let offered = before / 3.0;
    observations.push(Observation {
        config: drowned,
        rate: offered,
        busy_fraction: Some(1.0),
        latency_p95_ms: 60_000.0,
        recovery_s: None,
        cpu_cores: 4.0,
        memory_mb: 4_096.0,
    });
    let after = Surrogate::fit(&space, &observations, PriorMean::Physics, &fit_options(0))
        .unwrap()
        .predict(&drowned, 20_000.0)
        .unwrap()
        .capacity
        .median();
    assert!(
        after < 1.3 * offered,
        "drowned at {offered:.0}/s, predicted {before:.0} before and {after:.0} after"
    );
}

#![allow(clippy::unwrap_used)]

use super::*;

fn config(p: u32, slots: u32, mem: u32, cpu: u32, ckpt: u32) -> JobConfig {
    JobConfig {
        parallelism: p,
        slots_per_tm: slots,
        tm_memory_mb: mem,
        tm_cpu_millis: cpu,
        checkpoint_interval_s: ckpt,
    }
}

/// Observations generated from the prior's own shapes must give its scalars back.
#[test]
fn fit_recovers_its_own_shapes() {
    let truth = PhysicsPrior {
        log_capacity: [7.0, 0.85, 0.6, 0.15, -0.1],
        latency_base_ms: 80.0,
        latency_queue_k: 0.3,
        latency_window_s: 60.0,
        restart_s: 20.0,
        drain_factor: 1.0,
    };
    let mut observations = Vec::new();
    for (i, p) in [8, 12, 16, 20, 24].into_iter().enumerate() {
        for (j, slots) in [1, 2, 4].into_iter().enumerate() {
            let c = config(
                p,
                slots,
                1024 * (1 + (i + j) as u32 % 4),
                1000 + 500 * ((2 * i + j) as u32 % 3),
                10 + 20 * ((i + 2 * j) as u32 % 5),
            );
            let cap = truth.capacity(&c);
            for fraction in [0.3, 0.6, 0.85] {
                let rate = cap * fraction;
                observations.push(Observation {
                    config: c,
                    rate,
                    busy_fraction: Some(fraction),
                    latency_p95_ms: truth.latency_ms(&c, rate),
                    recovery_s: Some(truth.recovery_s(&c, rate)),
                    cpu_cores: 1.0,
                    memory_mb: 1.0,
                });
            }
        }
    }
    let fitted = PhysicsPrior::fit(&observations);
    for (a, b) in fitted.log_capacity.iter().zip(&truth.log_capacity) {
        assert!(
            (a - b).abs() < 0.02,
            "{:?} vs {:?}",
            fitted.log_capacity,
            truth.log_capacity
        );
    }
    let c = config(16, 2, 2048, 2000, 30);
    for rate_fraction in [0.2, 0.7, 0.9] {
        let rate = truth.capacity(&c) * rate_fraction;
        let rel = |a: f64, b: f64| (a / b).ln().abs();
        assert!(rel(fitted.latency_ms(&c, rate), truth.latency_ms(&c, rate)) < 0.1);
        assert!(rel(fitted.recovery_s(&c, rate), truth.recovery_s(&c, rate)) < 0.1);
    }
}

#[test]
fn shapes_respect_the_physics() {
    let prior = PhysicsPrior::fit(&[]);
    let c = config(12, 2, 2048, 2000, 30);
    let cap = prior.capacity(&c);
    assert!(prior.latency_ms(&c, 0.9 * cap) > prior.latency_ms(&c, 0.5 * cap));
    assert!(prior.latency_ms(&c, 1.2 * cap) > 10.0 * prior.latency_ms(&c, 0.9 * cap));
    assert!(prior.recovery_s(&c, 0.9 * cap) > prior.recovery_s(&c, 0.5 * cap));
    assert_eq!(prior.recovery_s(&c, 1.1 * cap), RECOVERY_CAP_S);
    let longer = JobConfig {
        checkpoint_interval_s: 90,
        ..c
    };
    assert!(prior.recovery_s(&longer, 0.5 * cap) > prior.recovery_s(&c, 0.5 * cap));
}

#[test]
fn one_outlier_does_not_move_capacity() {
    let c = config(12, 1, 2048, 1000, 30);
    let clean = |rate: f64| Observation {
        config: c,
        rate,
        busy_fraction: Some(rate / 12_000.0),
        latency_p95_ms: 100.0,
        recovery_s: None,
        cpu_cores: 1.0,
        memory_mb: 1.0,
    };
    let mut observations: Vec<_> = (1..10).map(|i| clean(1000.0 * f64::from(i))).collect();
    observations.push(Observation {
        busy_fraction: Some(0.06),
        ..clean(9000.0)
    });
    let prior = PhysicsPrior::fit(&observations);
    assert!(
        (prior.capacity(&c) / 12_000.0).ln().abs() < 0.05,
        "{}",
        prior.capacity(&c)
    );
}

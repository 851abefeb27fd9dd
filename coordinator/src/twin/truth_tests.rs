//! Tests of the ground truth (split out to keep `truth.rs` short).
#![allow(clippy::unwrap_used)]
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::models::space::SearchSpace;

fn example() -> GroundTruth {
    GroundTruth::from_toml(include_str!("../../testdata/twin.toml")).unwrap()
}

fn config(text: &str) -> JobConfig {
    text.parse().unwrap()
}

#[test]
fn capacity_has_diminishing_returns_gc_and_checkpoint_effects() {
    let truth = example();
    let cap = |s: &str| truth.capacity(&config(s));
    let (p8, p16, p24) = (
        cap("p=8,slots=1,mem=4g,cpu=1,ckpt=50"),
        cap("p=16,slots=1,mem=4g,cpu=1,ckpt=50"),
        cap("p=24,slots=1,mem=4g,cpu=1,ckpt=50"),
    );
    assert!(p8 < p16 && p16 < p24);
    assert!(p24 / p8 < 3.0 && p16 / p8 > p24 / p16);
    assert!(cap("p=16,slots=4,mem=1g,cpu=2,ckpt=50") < cap("p=16,slots=4,mem=4g,cpu=2,ckpt=50"));
    assert!(cap("p=16,slots=1,mem=4g,cpu=1,ckpt=10") < cap("p=16,slots=1,mem=4g,cpu=1,ckpt=90"));
    assert!(cap("p=16,slots=1,mem=4g,cpu=1,ckpt=50") < cap("p=16,slots=1,mem=4g,cpu=3,ckpt=50"));
}

#[test]
fn latency_and_recovery_blow_up_near_capacity() {
    let truth = example();
    let c = config("p=12,slots=2,mem=2g,cpu=2,ckpt=30");
    let cap = truth.capacity(&c);
    let at = |f: f64| truth.outcomes(&c, f * cap);
    assert!(at(0.9).latency_p95_ms > at(0.3).latency_p95_ms);
    assert!(at(1.3).latency_p95_ms > 10_000.0);
    assert!(at(0.9).recovery_s > at(0.3).recovery_s);
    assert_eq!(at(1.1).recovery_s, RECOVERY_CAP_S);
    assert_eq!(at(1.1).busy_fraction, 1.0);
}

#[test]
fn observations_are_deterministic_per_seed_and_noisy() {
    let truth = example();
    let candidates = SearchSpace::default().candidates();
    let a = truth.sample(
        &candidates,
        (1000.0, 40_000.0),
        20,
        &mut StdRng::seed_from_u64(7),
    );
    let b = truth.sample(
        &candidates,
        (1000.0, 40_000.0),
        20,
        &mut StdRng::seed_from_u64(7),
    );
    let c = truth.sample(
        &candidates,
        (1000.0, 40_000.0),
        20,
        &mut StdRng::seed_from_u64(8),
    );
    assert_eq!(a, b);
    assert_ne!(a, c);
    let exact = truth.outcomes(&a[0].config, a[0].rate);
    assert_ne!(a[0].latency_p95_ms, exact.latency_p95_ms);
    assert!((a[0].latency_p95_ms / exact.latency_p95_ms).ln().abs() < 0.5);
}

#[test]
fn rejects_nonsense_values() {
    let text = include_str!("../../testdata/twin.toml").replace("noise = 0.08", "noise = -1.0");
    assert!(GroundTruth::from_toml(&text).is_err());
}

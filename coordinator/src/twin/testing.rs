//! Shared fixtures for tests that drive policies through the twin (compiled for tests only).
#![allow(clippy::unwrap_used)]

use super::profiling::ProfilingTimes;
use super::sim::{Scenario, SimOptions, SimRun, simulate};
use super::truth::GroundTruth;
use crate::models::space::{JobConfig, SearchSpace};
use crate::models::surrogate::Qos;
use crate::policy::Policy;

/// The benchmark's QoS: p95 ≤ 500 ms, recovery ≤ 180 s.
pub const QOS: Qos = Qos {
    latency_p95_ms: 500.0,
    recovery_s: 180.0,
};

/// The benchmark job (`testdata/twin-benchmark.toml`).
pub fn benchmark_truth() -> GroundTruth {
    GroundTruth::from_toml(include_str!("../../testdata/twin-benchmark.toml")).unwrap()
}

pub fn options(seed: u64, failures_every_s: Option<u64>, timeline_every_s: u64) -> SimOptions {
    SimOptions {
        qos: QOS,
        failures_every_s,
        seed,
        profiling: ProfilingTimes::default(),
        timeline_every_s,
    }
}

/// Runs `policy` on the benchmark job over the paper's grid, starting from `initial`.
pub fn run(
    policy: &mut dyn Policy,
    rates: &[f64],
    initial: JobConfig,
    options: SimOptions,
) -> SimRun {
    run_on(benchmark_truth(), policy, rates, initial, options)
}

/// The same on another job.
pub fn run_on(
    truth: GroundTruth,
    policy: &mut dyn Policy,
    rates: &[f64],
    initial: JobConfig,
    options: SimOptions,
) -> SimRun {
    let space = SearchSpace::default();
    simulate(
        policy,
        Scenario {
            truth: &truth,
            space: &space,
            rates,
            initial,
        },
        options,
    )
}

/// The first `hours` of a shipped trace, one rate per second.
pub fn trace_hours(name: &str, hours: usize) -> Vec<f64> {
    let path = format!("{}/../data/traces/{name}", env!("CARGO_MANIFEST_DIR"));
    let trace = crate::trace::parse_rate_trace(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut rates = super::sim::rates_per_second(&trace);
    rates.truncate(hours * 3600);
    rates
}

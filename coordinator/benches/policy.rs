//! Decision time of the Demeter policy: one optimisation epoch (surrogate refresh, forecast,
//! prediction of every candidate, profiling test, pricing) and one risk check, at n = 100,
//! 300 and 500 observations in the policy's memory, with a full hyperparameter refit and with
//! the fast path (new data conditioned on the last hyperparameters). Prints a table of thread
//! CPU times (the machine is shared; wall time overstates one core's work).
//!
//! `cargo bench -p demeter-coordinator --bench policy`

use std::time::Duration;

use demeter_coordinator::models::space::{JobConfig, SearchSpace};
use demeter_coordinator::models::surrogate::Qos;
use demeter_coordinator::policy::demeter::{DemeterConfig, demeter_policy};
use demeter_coordinator::policy::{JobPhase, JobTick, Policy};
use demeter_coordinator::twin::truth::GroundTruth;
use rand::SeedableRng;
use rand::rngs::StdRng;

const QOS: Qos = Qos {
    latency_p95_ms: 500.0,
    recovery_s: 180.0,
};

fn cpu_ms() -> f64 {
    cpu_time::ThreadTime::now().as_duration().as_secs_f64() * 1000.0
}

fn tick(truth: &GroundTruth, config: JobConfig, rate: f64) -> JobTick {
    let o = truth.outcomes(&config, rate);
    JobTick {
        phase: JobPhase::Running,
        config,
        rate,
        busy_fraction: Some(o.busy_fraction),
        latency_p95_ms: Some(o.latency_p95_ms),
        backlog: 0.0,
        cpu_cores: o.cpu_cores,
        memory_mb: o.memory_mb,
    }
}

/// Runs ticks until the policy's next deadline and times `handle_timeout` there.
fn next_epoch(
    policy: &mut impl Policy,
    truth: &GroundTruth,
    t: &mut u64,
    config: JobConfig,
) -> f64 {
    let due = policy
        .poll_timeout()
        .map_or(*t + 1, |d| d.as_secs().max(*t + 1));
    while *t < due {
        *t += 1;
        let rate = 12_000.0 + 500.0 * ((*t as f64) / 300.0).sin();
        policy.handle_observation(Duration::from_secs(*t), &tick(truth, config, rate));
    }
    let start = cpu_ms();
    policy.handle_timeout(Duration::from_secs(*t));
    let elapsed = cpu_ms() - start;
    while policy.poll_action().is_some() {}
    elapsed
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let truth = GroundTruth::from_toml(include_str!("../testdata/twin.toml"))?;
    let space = SearchSpace::default();
    let candidates = space.candidates();
    println!(
        "Demeter policy decision time, {} candidates, thread CPU ms (release, shared 2-core machine)",
        candidates.len()
    );
    println!("     n  optimise+full refit  optimise (conditioned)  risk check");
    for n in [100usize, 300, 500] {
        let config = DemeterConfig {
            max_profiling_observations: n,
            max_production_observations: 10,
            // Only the timed epochs may act; keep the policy where it is.
            min_saving: 10.0,
            max_copies: 0,
            ..DemeterConfig::default()
        };
        let mut policy = demeter_policy(space.clone(), QOS, config, 7)?;
        let mut rng = StdRng::seed_from_u64(n as u64);
        let observations = truth.sample(&candidates, (4_000.0, 30_000.0), n, &mut rng);
        let production = JobConfig::paper_default();
        let mut t = 0u64;
        policy.handle_observation(Duration::from_secs(0), &tick(&truth, production, 12_000.0));
        policy.handle_profile_results(Duration::from_secs(0), 0, &observations);
        let full = next_epoch(&mut policy, &truth, &mut t, production);
        let mut risks = Vec::new();
        let mut conditioned = Vec::new();
        for _ in 0..25 {
            // New data since the last epoch, so the next one conditions on it.
            let extra = truth.sample(&candidates, (4_000.0, 30_000.0), 1, &mut rng);
            policy.handle_profile_results(Duration::from_secs(t), 0, &extra);
            let before = policy.poll_timeout().map(|d| d.as_secs());
            let ms = next_epoch(&mut policy, &truth, &mut t, production);
            // Optimisation epochs come every 600 s, risk checks every 60 s in between.
            if before.is_some_and(|d| d % 600 == 180) {
                conditioned.push(ms);
            } else {
                risks.push(ms);
            }
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        println!(
            "{n:>6} {full:>20.1} {:>23.1} {:>11.1}",
            median(conditioned),
            median(risks)
        );
    }
    Ok(())
}

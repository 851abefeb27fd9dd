//! The oracle against the twin: never costlier than static, ahead of a rate rise, and only
//! ever choosing what truly meets the QoS.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::policy::baselines::Fixed;
use crate::twin::sim::{SimEvent, SimRun};
use crate::twin::testing::{self, QOS, benchmark_truth as truth, trace_hours};

fn run(policy: &mut dyn Policy, rates: &[f64], failures_every_s: Option<u64>) -> SimRun {
    let options = testing::options(11, failures_every_s, 1);
    testing::run(policy, rates, JobConfig::paper_default(), options)
}

fn oracle(rates: &[f64]) -> Oracle {
    Oracle::new(
        truth(),
        SearchSpace::default(),
        QOS,
        rates.to_vec(),
        JobConfig::paper_default(),
        OracleSettings::default(),
    )
}

#[test]
fn never_costlier_than_static_on_a_trace() {
    // Hours 3–6 of CARS include its 37.6k peak; failures as in the benchmark.
    let rates: Vec<f64> = trace_hours("CARS_3D_1S_4_sub_35K_max.csv", 6)[3 * 3600..].to_vec();
    let fixed = run(&mut Fixed, &rates, Some(2700));
    let oracle = run(&mut oracle(&rates), &rates, Some(2700));
    assert_eq!(fixed.summary.cost, 1.0);
    assert!(
        oracle.summary.cost < fixed.summary.cost,
        "oracle {} vs static {}",
        oracle.summary.cost,
        fixed.summary.cost
    );
    assert!(oracle.summary.reconfigurations() > 0);
    assert_eq!(oracle.summary.recoveries_over_qos, 0);
}

#[test]
fn moves_before_the_rate_rises_and_only_to_feasible_configurations() {
    let truth = truth();
    let (low, high) = (6_000.0, 30_000.0);
    let rise = 3600;
    let rates: Vec<f64> = std::iter::repeat_n(low, rise)
        .chain(std::iter::repeat_n(high, 3600))
        .collect();
    let result = run(&mut oracle(&rates), &rates, None);
    let mut chosen = Vec::new();
    for event in &result.events {
        if let SimEvent::Action { t_s, action } = event
            && let Action::Reconfigure { to, decision, .. } = action.as_ref()
        {
            let numbers = decision.chosen.unwrap();
            assert!(numbers.latency_p95_ms <= QOS.latency_p95_ms);
            assert!(numbers.recovery_s <= QOS.recovery_s);
            let true_max = rates[*t_s as usize..]
                .iter()
                .take(600)
                .fold(0.0, |a: f64, b| a.max(*b));
            assert!(
                numbers.rate >= true_max,
                "decided for {} < {true_max}",
                numbers.rate
            );
            chosen.push((*t_s, *to));
        }
    }
    // Cheaper than static while the rate is low…
    let first = chosen.first().unwrap();
    assert!(first.0 < 60.0);
    assert!(first.1.total_memory_mb() < JobConfig::paper_default().total_memory_mb());
    // …and already on a configuration that carries the high rate when it arrives.
    let at_rise = result.timeline[rise].config.parse::<JobConfig>().unwrap();
    let outcomes = truth.outcomes(&at_rise, high);
    assert!(outcomes.latency_p95_ms <= QOS.latency_p95_ms, "{at_rise}");
    assert!(outcomes.recovery_s <= QOS.recovery_s, "{at_rise}");
    assert!(result.timeline[rise].backlog == 0.0);
}

#[test]
fn cost_is_half_cpu_half_memory_of_the_reference() {
    let o = oracle(&[1.0]);
    assert_eq!(o.cost(&JobConfig::paper_default()), 1.0);
    let half: JobConfig = "p=12,slots=1,mem=4g,cpu=1,ckpt=10".parse().unwrap();
    assert!((o.cost(&half) - 0.5).abs() < 1e-12);
    let small_memory: JobConfig = "p=24,slots=1,mem=1g,cpu=1,ckpt=10".parse().unwrap();
    assert!((o.cost(&small_memory) - 0.625).abs() < 1e-12);
}

#[test]
fn an_overloaded_job_still_gets_a_decision() {
    // More than any configuration carries: the backlog never drains, yet the oracle must move
    // to the most capable configuration instead of waiting for a recovery forever.
    let rates = vec![80_000.0; 1800];
    let result = run(&mut oracle(&rates), &rates, None);
    let targets: Vec<JobConfig> = result
        .events
        .iter()
        .filter_map(|e| match e {
            SimEvent::Action { action, .. } => match action.as_ref() {
                Action::Reconfigure { to, .. } => Some(*to),
                Action::Profile { .. } => None,
            },
            _ => None,
        })
        .collect();
    assert!(!targets.is_empty());
    let truth = truth();
    assert!(truth.capacity(&targets[0]) > truth.capacity(&JobConfig::paper_default()));
}

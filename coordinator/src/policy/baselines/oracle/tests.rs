//! The oracle against the twin: cheaper than static on both traces within every limit the
//! targets set (changes, disruption, no steady second over the QoS), ahead of a rate rise,
//! never in a configuration that truly misses the QoS, and clear of failure recoveries.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::models::space::SearchSpace;
use crate::policy::baselines::Fixed;
use crate::twin::sim::{SimEvent, SimRun};
use crate::twin::testing::{self, QOS, benchmark_truth as truth, trace_hours};

const FAILURES_EVERY_S: u64 = 2700;

fn world(rates: &[f64], failures_every_s: Option<u64>) -> Foresight {
    Foresight {
        truth: truth(),
        space: SearchSpace::default(),
        qos: QOS,
        rates: rates.to_vec(),
        reference: JobConfig::paper_default(),
        failures_every_s,
    }
}

fn oracle(rates: &[f64], failures_every_s: Option<u64>, settings: OracleSettings) -> Oracle {
    Oracle::new(world(rates, failures_every_s), settings)
}

fn run(policy: &mut dyn Policy, rates: &[f64], failures_every_s: Option<u64>) -> SimRun {
    let options = testing::options(11, failures_every_s, 1);
    testing::run(policy, rates, JobConfig::paper_default(), options)
}

/// (issued at, to) of every reconfiguration the run's policy asked for.
fn changes(run: &SimRun) -> Vec<(f64, JobConfig)> {
    run.events
        .iter()
        .filter_map(|e| match e {
            SimEvent::Action { t_s, action } => match action.as_ref() {
                Action::Reconfigure { to, .. } => Some((*t_s, *to)),
                Action::Profile { .. } => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn cost_is_half_cpu_half_memory_of_the_reference() {
    let o = oracle(&[1.0], None, OracleSettings::default());
    assert_eq!(o.cost(&JobConfig::paper_default()), 1.0);
    let half: JobConfig = "p=12,slots=1,mem=4g,cpu=1,ckpt=10".parse().unwrap();
    assert!((o.cost(&half) - 0.5).abs() < 1e-12);
    let small_memory: JobConfig = "p=24,slots=1,mem=1g,cpu=1,ckpt=10".parse().unwrap();
    assert!((o.cost(&small_memory) - 0.625).abs() < 1e-12);
}

#[test]
fn the_change_budget_is_twelve_per_eighteen_hours() {
    let settings = OracleSettings::default();
    assert_eq!(settings.change_budget(64_800), 12);
    assert_eq!(settings.change_budget(64_803), 12);
    assert_eq!(settings.change_budget(6 * 3600), 4);
    assert_eq!(settings.change_budget(1800), 1, "at least one");
    let fixed = OracleSettings {
        max_changes: Some(3),
        ..settings
    };
    assert_eq!(fixed.change_budget(64_800), 3);
}

#[test]
fn cheaper_than_static_on_both_traces_within_every_limit() {
    for name in [
        "CARS_3D_1S_4_sub_35K_max.csv",
        "ADS_3D_1S_4_sub_30K_max.csv",
    ] {
        let rates = trace_hours(name, 18);
        let settings = OracleSettings::default();
        let mut policy = oracle(&rates, Some(FAILURES_EVERY_S), settings);
        let result = run(&mut policy, &rates, Some(FAILURES_EVERY_S));
        let fixed = run(&mut Fixed, &rates, Some(FAILURES_EVERY_S));
        let s = &result.summary;
        let plan = policy.plan().unwrap();
        assert_eq!(plan.violations, 0, "{name}");
        assert!(s.cost < fixed.summary.cost, "{name}: {}", s.cost);
        assert!(s.reconfigurations() <= 12, "{name}");
        assert!(s.reconfigurations() > 0, "{name}: the oracle should move");
        assert_eq!(s.changes.rolled_back, 0);
        // No steady second over the latency QoS; changes within the disruption budget, which
        // the plan's (conservative) estimate already respected.
        assert_eq!(s.seconds_over_latency.steady, 0, "{name}");
        let budget = settings.max_disruption_share * rates.len() as f64;
        assert!(plan.disruption_s <= budget, "{name}");
        assert!(
            s.seconds_over_latency.change as f64 <= plan.disruption_s,
            "{name}: {} s over in changes, planned {}",
            s.seconds_over_latency.change,
            plan.disruption_s
        );
        assert!(s.percent_over_latency <= 1.5, "{name}");
        assert_eq!(s.recoveries_over_qos, 0, "{name}");

        // Never in a configuration that truly misses the QoS at the second's rate.
        let world = world(&rates, None);
        for row in result.timeline.iter().filter(|r| r.over_qos_change_s == 0) {
            let config: JobConfig = row.config.parse().unwrap();
            let rate = rates[row.t_s as usize];
            assert!(
                world.feasible(&config, rate),
                "{name} {}: {config}",
                row.t_s
            );
        }

        // No change overlaps a failure's recovery: none is issued within the recovery QoS
        // after a failure, and none is in flight when one strikes.
        let failures: Vec<f64> = (1..)
            .map(|k| (k * FAILURES_EVERY_S) as f64)
            .take_while(|f| *f < rates.len() as f64)
            .collect();
        let done: Vec<f64> = result
            .events
            .iter()
            .filter_map(|e| match e {
                SimEvent::Reconfigured { t_s, .. } => Some(*t_s),
                _ => None,
            })
            .collect();
        for ((issued, _), finished) in changes(&result).iter().zip(&done) {
            for f in &failures {
                assert!(
                    !(*f <= *issued && *issued < f + QOS.recovery_s),
                    "{name}: change at {issued} inside the recovery of the failure at {f}"
                );
                assert!(
                    !(*issued <= *f && *f < *finished),
                    "{name}: failure at {f} during the change {issued}..{finished}"
                );
            }
        }
    }
}

#[test]
fn respects_the_change_budget() {
    let rates = trace_hours("CARS_3D_1S_4_sub_35K_max.csv", 6);
    let mut costs = Vec::new();
    for max_changes in [0, 1, 2] {
        let settings = OracleSettings {
            max_changes: Some(max_changes),
            ..OracleSettings::default()
        };
        let mut policy = oracle(&rates, None, settings);
        let result = run(&mut policy, &rates, None);
        assert!(result.summary.reconfigurations() <= u64::from(max_changes));
        assert!(policy.plan().unwrap().changes.len() <= max_changes as usize);
        costs.push(result.summary.cost);
    }
    assert_eq!(costs[0], 1.0, "no change allowed: static");
    assert!(costs[1] < costs[0] && costs[2] <= costs[1], "{costs:?}");
}

#[test]
fn moves_before_the_rate_rises() {
    let truth = truth();
    let (low, high) = (6_000.0, 30_000.0);
    let rise = 3600;
    let rates: Vec<f64> = std::iter::repeat_n(low, rise)
        .chain(std::iter::repeat_n(high, 3600))
        .collect();
    let result = run(
        &mut oracle(&rates, None, OracleSettings::default()),
        &rates,
        None,
    );
    let chosen = changes(&result);
    // Cheaper than static while the rate is low, from the start…
    let first = chosen.first().unwrap();
    assert!(first.0 < 60.0);
    assert!(first.1.total_memory_mb() < JobConfig::paper_default().total_memory_mb());
    // …and already on a configuration that carries the high rate, caught up, when it arrives.
    let at_rise = result.timeline[rise].config.parse::<JobConfig>().unwrap();
    let outcomes = truth.outcomes(&at_rise, high);
    assert!(outcomes.latency_p95_ms <= QOS.latency_p95_ms, "{at_rise}");
    assert!(outcomes.recovery_s <= QOS.recovery_s, "{at_rise}");
    assert_eq!(result.timeline[rise].backlog, 0.0);
    assert_eq!(result.summary.seconds_over_latency.steady, 0);
}

#[test]
fn an_overloaded_job_moves_to_the_most_capable_configuration() {
    // More than any configuration carries: nothing meets the QoS, so the schedule limits the
    // damage with the most capable configuration (the best achievable) instead of staying put.
    let rates = vec![80_000.0; 1800];
    let mut policy = oracle(&rates, None, OracleSettings::default());
    let result = run(&mut policy, &rates, None);
    let targets = changes(&result);
    assert!(!targets.is_empty());
    let truth = truth();
    let most_capable = SearchSpace::default()
        .candidates()
        .into_iter()
        .map(|c| truth.capacity(&c))
        .fold(0.0, f64::max);
    assert_eq!(truth.capacity(&targets[0].1), most_capable);
    assert_eq!(policy.plan().unwrap().violations, 0);
}

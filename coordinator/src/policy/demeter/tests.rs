//! Behaviour of the Demeter policy against a small deterministic loop around the twin's ground
//! truth (not the twin simulator: a second-by-second job with backlog, downtime on changes,
//! failures, and profiling copies answered from the truth after their run time).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::models::surrogate::Qos;
use crate::policy::ChangeKind;
use crate::policy::decision::Reason;
use crate::policy::{Action, JobPhase, JobTick, Policy, ProfilingRoom, ReconfigureOutcome};
use crate::twin::truth::{GroundTruth, standard_normal};

const QOS: Qos = Qos {
    latency_p95_ms: 500.0,
    recovery_s: 180.0,
};
const RESTART_S: u64 = 30;
const IN_PLACE_S: u64 = 5;

fn truth() -> GroundTruth {
    GroundTruth::from_toml(include_str!("../../../testdata/twin.toml")).unwrap()
}

/// Smaller memory and cheaper fits: debug-build tests stay quick.
fn test_config() -> DemeterConfig {
    DemeterConfig {
        max_production_observations: 120,
        max_profiling_observations: 60,
        fit_restarts: 1,
        ..DemeterConfig::default()
    }
}

#[derive(Debug, Default)]
struct Run {
    actions: Vec<(u64, Action)>,
    over_qos_s: u64,
    /// Seconds over the QoS per 10 minutes (where they come from).
    over_by_10min: std::collections::BTreeMap<u64, u64>,
    seconds: u64,
    final_config: Option<JobConfig>,
    /// Seconds at which a cost-saving move was ordered while the job was still catching up
    /// after a failure.
    savings_in_recovery: Vec<u64>,
}

impl Run {
    fn reconfigurations(&self) -> usize {
        self.actions
            .iter()
            .filter(|(_, a)| matches!(a, Action::Reconfigure { .. }))
            .count()
    }
}

/// Drives `policy` for `rates.len()` seconds; a failure every `fail_every_s` (0: none).
fn simulate(policy: &mut DemeterPolicy, rates: &[f64], fail_every_s: u64, seed: u64) -> Run {
    let truth = truth();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut config = JobConfig::paper_default();
    let mut backlog = 0.0;
    let mut down_until = 0u64;
    let mut pending: Option<(u64, JobConfig, u64)> = None; // (done at, to, downtime)
    let mut profiles: Vec<(u64, u64, Vec<JobConfig>, f64)> = Vec::new();
    let mut run = Run::default();
    let mut recovering = false;
    for (t, &rate) in rates.iter().enumerate() {
        let t = t as u64 + 1;
        let now = Duration::from_secs(t);
        if fail_every_s > 0 && t.is_multiple_of(fail_every_s) && t >= down_until {
            down_until = t + 20;
            recovering = true;
        }
        let down = t < down_until;
        recovering &= down || backlog > rate;
        let capacity = truth.capacity(&config);
        let tick = if down {
            backlog += rate;
            JobTick {
                phase: JobPhase::Down,
                config,
                rate,
                busy_fraction: None,
                latency_p95_ms: None,
                backlog,
                cpu_cores: 0.0,
                memory_mb: 0.0,
            }
        } else {
            let processed = capacity.min(backlog + rate);
            backlog = (backlog + rate - processed).max(0.0);
            let steady = truth.outcomes(&config, rate);
            let noise = (truth.noise * standard_normal(&mut rng)).exp();
            let latency = steady.latency_p95_ms * noise + 1000.0 * backlog / capacity;
            JobTick {
                phase: JobPhase::Running,
                config,
                rate,
                busy_fraction: Some((processed / capacity).min(1.0)),
                latency_p95_ms: Some(latency),
                backlog,
                cpu_cores: steady.cpu_cores,
                memory_mb: steady.memory_mb,
            }
        };
        run.seconds += 1;
        if tick.latency_p95_ms.is_none_or(|l| l > QOS.latency_p95_ms) {
            run.over_qos_s += 1;
            *run.over_by_10min.entry(t / 600 * 10).or_default() += 1;
        }
        policy.handle_observation(now, &tick);
        if let Some((done, to, downtime)) = pending
            && t >= done
        {
            pending = None;
            config = to;
            let outcome = ReconfigureOutcome {
                running: to,
                succeeded: true,
                downtime_s: downtime as f64,
            };
            policy.handle_reconfigured(now, &outcome);
        }
        let due: Vec<_> = profiles.iter().filter(|p| p.1 <= t).cloned().collect();
        profiles.retain(|p| p.1 > t);
        for (batch, _, candidates, rate) in due {
            let results: Vec<_> = candidates
                .iter()
                .map(|c| truth.observe(c, rate, &mut rng))
                .collect();
            policy.handle_profile_results(now, batch, &results);
        }
        while policy.poll_timeout().is_some_and(|d| d <= now) {
            policy.handle_timeout(now);
        }
        while let Some(action) = policy.poll_action() {
            match &action {
                Action::Reconfigure { to, kind, decision } => {
                    if recovering && matches!(decision.reason, Reason::Cheaper { .. }) {
                        run.savings_in_recovery.push(t);
                    }
                    let downtime = match kind {
                        ChangeKind::InPlace => IN_PLACE_S,
                        ChangeKind::FullRestart => RESTART_S,
                    };
                    down_until = t + 1 + downtime;
                    pending = Some((down_until, *to, downtime));
                }
                Action::Profile {
                    batch,
                    candidates,
                    rate,
                    ..
                } => profiles.push((*batch, t + 240, candidates.clone(), *rate)),
            }
            run.actions.push((t, action));
        }
    }
    run.final_config = Some(config);
    run
}

fn policy(seed: u64) -> DemeterPolicy {
    demeter_policy(SearchSpace::default(), QOS, test_config(), seed).unwrap()
}

/// A steady rate with ±`noise` relative jitter, deterministic.
fn noisy(rate: f64, seconds: usize, noise: f64, seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..seconds)
        .map(|_| rate * (1.0 + noise * standard_normal(&mut rng)).max(0.1))
        .collect()
}

fn cost_share(config: &JobConfig) -> (f64, f64) {
    let safe = JobConfig::paper_default();
    (
        config.total_cpu_cores() / safe.total_cpu_cores(),
        config.total_memory_mb() / safe.total_memory_mb(),
    )
}

#[test]
fn starts_by_profiling_when_nothing_is_known() {
    let mut p = policy(1);
    let run = simulate(&mut p, &noisy(12_000.0, 900, 0.03, 1), 0, 1);
    let (at, first) = run.actions.first().expect("an action within 15 minutes");
    let Action::Profile {
        candidates,
        rate,
        decision,
        ..
    } = first
    else {
        panic!("first action should profile, got {first:?}");
    };
    assert!(*at <= 300, "first epoch is early, got t = {at}");
    assert!(!candidates.is_empty() && candidates.len() <= test_config().max_copies);
    assert!(matches!(decision.reason, Reason::ProfileUncertain { .. }));
    let forecast = decision.forecast.unwrap();
    assert!(*rate >= 12_000.0 && forecast.upper_max >= forecast.point_max);
    let safe = JobConfig::paper_default();
    assert!(
        candidates
            .iter()
            .all(|c| cost_share(c).0 < 1.0 || cost_share(c).1 < 1.0),
        "profiles candidates that could be cheaper than {safe}"
    );
}

#[test]
fn orders_only_copies_that_fit_beside_production() {
    // Unrestricted, the first batch here is three copies of 16–18 cores each. Told the room
    // copies have, the first batch fits in it together; with no room at all
    // nothing is ordered (a batch would wait for production to shrink, its rate gone stale).
    let room = ProfilingRoom {
        cpu_cores: 20.0,
        memory_mb: 24_576.0,
    };
    let mut p = policy(1);
    p.handle_profiling_room(Duration::ZERO, room);
    let run = simulate(&mut p, &noisy(12_000.0, 900, 0.03, 1), 0, 1);
    let Some((_, Action::Profile { candidates, .. })) = run.actions.first() else {
        panic!("the first action should profile: {:?}", run.actions.first());
    };
    let cores: f64 = candidates.iter().map(JobConfig::total_cpu_cores).sum();
    let memory: f64 = candidates.iter().map(JobConfig::total_memory_mb).sum();
    assert!(
        cores <= room.cpu_cores && memory <= room.memory_mb,
        "{candidates:?}"
    );

    let mut p = policy(1);
    let none = ProfilingRoom {
        cpu_cores: 0.0,
        memory_mb: 0.0,
    };
    p.handle_profiling_room(Duration::ZERO, none);
    let run = simulate(&mut p, &noisy(12_000.0, 900, 0.03, 1), 0, 1);
    assert!(
        !run.actions
            .iter()
            .any(|(_, a)| matches!(a, Action::Profile { .. })),
        "{:?}",
        run.actions
    );
}

#[test]
fn beside_a_large_production_an_unmeasured_shape_is_probed_on_fewer_taskmanagers() {
    // Eight cores beside production: no copy that carries 14k events/s fits, so what the
    // policy learns of other shapes it learns from probes, each on fewer TaskManagers than
    // its candidate, fed that share of the rate, after production held its configuration.
    let room = ProfilingRoom {
        cpu_cores: 8.0,
        memory_mb: 32_768.0,
    };
    let cfg = DemeterConfig {
        probe_after_s: 1_800,
        ..test_config()
    };
    let mut p = demeter_policy(SearchSpace::default(), QOS, cfg, 1).unwrap();
    p.handle_profiling_room(Duration::ZERO, room);
    let run = simulate(&mut p, &noisy(14_000.0, 4 * 3_600, 0.03, 2), 2_700, 2);
    let mut last_change = None;
    let mut probes = 0;
    for (t, action) in &run.actions {
        match action {
            Action::Reconfigure { .. } => last_change = Some(*t),
            Action::Profile {
                candidates,
                rate,
                decision,
                ..
            } => {
                let Reason::ProfileShape { candidate } = decision.reason else {
                    continue;
                };
                probes += 1;
                let [copy] = candidates.as_slice() else {
                    panic!("a probe is one copy: {candidates:?}");
                };
                assert!(
                    copy.same_taskmanager_shape(&candidate),
                    "{copy} for {candidate}"
                );
                assert!(
                    copy.parallelism < candidate.parallelism,
                    "{copy} for {candidate}"
                );
                assert!(
                    2 * copy.parallelism >= candidate.parallelism,
                    "{copy} for {candidate}"
                );
                assert!(copy.total_cpu_cores() <= room.cpu_cores, "{copy}");
                assert!(
                    candidate.total_cpu_cores() > room.cpu_cores,
                    "{candidate} fits whole"
                );
                let plan = decision.chosen.unwrap().rate;
                let share = f64::from(copy.parallelism) / f64::from(candidate.parallelism);
                assert!(
                    (rate - plan * share).abs() < 1e-6,
                    "{rate} vs {plan} × {share}"
                );
                assert!(
                    last_change.is_none_or(|c| t - c >= 1_800),
                    "a probe {}s after a change",
                    t - last_change.unwrap_or(0)
                );
            }
        }
    }
    assert!(probes > 0, "no probe: {:#?}", run.actions);
}

#[test]
fn converges_to_a_cheap_feasible_configuration_and_keeps_every_decision_explained() {
    let mut p = policy(2);
    let rate = 12_000.0;
    let run = simulate(&mut p, &noisy(rate, 4 * 3_600, 0.05, 2), 2_700, 2);
    let last = run.final_config.unwrap();
    let (cpu, memory) = cost_share(&last);
    // Cheap by the cost the policy minimises and the benchmark reports (½ CPU + ½ memory of
    // the safe default), not by each resource: a CPU-heavy, memory-light configuration
    // (0.75 of the CPU, 0.19 of the memory) is a 53 % saving.
    assert!(
        0.5 * (cpu + memory) < 0.6,
        "still expensive: {last} ({cpu:.2}, {memory:.2})"
    );
    let truth = truth().outcomes(&last, rate * 1.1);
    assert!(
        truth.latency_p95_ms <= QOS.latency_p95_ms,
        "{last}: {truth:?}"
    );
    // The loop fails the job every 45 minutes (20 s down plus catch-up): about 2 % of the
    // seconds are over the QoS whatever the policy does.
    assert!(
        run.over_qos_s as f64 <= 0.05 * run.seconds as f64,
        "{} s over QoS",
        run.over_qos_s
    );
    for (_, action) in &run.actions {
        let decision = match action {
            Action::Reconfigure { decision, .. } | Action::Profile { decision, .. } => decision,
        };
        assert!(decision.forecast.is_some(), "{decision:?}");
        assert!(decision.chosen.is_some(), "{decision:?}");
        if let Action::Reconfigure { to, .. } = action {
            assert_eq!(decision.chosen.unwrap().config, *to);
        }
    }
    assert!(
        run.actions.iter().any(|(_, a)| matches!(a, Action::Reconfigure { decision, .. } if decision.best_rejected.is_some())),
        "a cost-saving move names the best candidate it passed over"
    );
}

#[test]
fn reacts_to_a_rate_ramp_before_violating_for_long() {
    let mut p = policy(3);
    let mut rates = noisy(9_000.0, 3 * 3_600, 0.04, 3);
    let ramp_start = rates.len();
    // +13k events/s within 20 minutes, then held: far beyond what a configuration chosen for
    // 9k can take.
    for s in 0..1_200 {
        let level = 9_000.0 + 13_000.0 * s as f64 / 1_200.0;
        rates.push(level);
    }
    rates.extend(noisy(22_000.0, 3_600, 0.04, 4));
    let run = simulate(&mut p, &rates, 0, 3);
    let before = run
        .actions
        .iter()
        .filter(|(t, a)| (*t as usize) < ramp_start && matches!(a, Action::Reconfigure { .. }))
        .count();
    assert!(
        before >= 1,
        "scaled down before the ramp:\n{}",
        describe(&run)
    );
    let scale_up = run.actions.iter().find(|(t, a)| {
        *t as usize >= ramp_start
            && matches!(a, Action::Reconfigure { to, .. } if truth().capacity(to) >= 22_000.0)
    });
    let (at, _) = scale_up.unwrap_or_else(|| panic!("no scale-up:\n{}", describe(&run)));
    assert!(
        (*at as usize) < ramp_start + 1_500,
        "scaled up late (t = {at}):\n{}",
        describe(&run)
    );
    let tail = &run;
    assert!(
        (tail.over_qos_s as f64) < 0.03 * tail.seconds as f64,
        "{} s over QoS:\n{}",
        tail.over_qos_s,
        describe(&run)
    );
}

#[test]
fn a_saving_waits_until_a_failure_is_caught_up() {
    // A failure every seven minutes: a cost-saving move ordered while the job drains a
    // failure's backlog would stop it again and stretch the recovery past its QoS.
    let mut p = policy(3);
    let run = simulate(&mut p, &noisy(12_000.0, 4 * 3_600, 0.05, 3), 420, 3);
    let savings = run
        .actions
        .iter()
        .filter(|(_, a)| matches!(a, Action::Reconfigure { decision, .. } if matches!(decision.reason, Reason::Cheaper { .. })))
        .count();
    assert!(savings > 0, "no saving to check: {:?}", run.actions);
    assert!(
        run.savings_in_recovery.is_empty(),
        "{:?}",
        run.savings_in_recovery
    );
}

#[test]
fn does_not_flap_on_noise() {
    let mut p = policy(4);
    let run = simulate(&mut p, &noisy(15_000.0, 6 * 3_600, 0.10, 5), 2_700, 4);
    assert!(
        run.reconfigurations() <= 3,
        "{} reconfigurations:\n{}",
        run.reconfigurations(),
        describe(&run)
    );
}

#[test]
fn the_same_seed_gives_the_same_decisions() {
    let rates = noisy(11_000.0, 5_400, 0.05, 6);
    let a = simulate(&mut policy(5), &rates, 2_000, 6);
    let b = simulate(&mut policy(5), &rates, 2_000, 6);
    assert!(!a.actions.is_empty());
    assert_eq!(a.actions, b.actions);
}

/// 2 h at 10k, then within 30 minutes up to `level`, held for 2 h.
fn rise_to(level: f64, seed: u64) -> Vec<f64> {
    let mut rates = noisy(10_000.0, 2 * 3_600, 0.03, seed);
    rates.extend((0..1_800).map(|s| 10_000.0 + (level - 10_000.0) * s as f64 / 1_800.0));
    rates.extend(noisy(level, 2 * 3_600, 0.03, seed + 1));
    rates
}

#[test]
fn on_the_safe_default_a_rise_it_carries_is_not_a_risk() {
    // The safe default carries 70 % of its capacity within both QoS bounds. Judged at the
    // upper quantile of an hour's maximum (2–3 × the point after an unforeseen rise, and five
    // times once the calibration's adaptive level ran away), it looked infeasible at such
    // rates: "at risk on the safe default already", p = 0, again and again.
    let safe = JobConfig::paper_default();
    let level = 0.7 * truth().capacity(&safe);
    let outcome = truth().outcomes(&safe, level);
    assert!(outcome.latency_p95_ms < QOS.latency_p95_ms && outcome.recovery_s < QOS.recovery_s);
    let config = DemeterConfig {
        max_copies: 0,
        min_saving: 10.0, // no cost-saving moves: any move is a risk move
        ..test_config()
    };
    let mut p = demeter_policy(SearchSpace::default(), QOS, config.clone(), 7).unwrap();
    let run = simulate(&mut p, &rise_to(level, 7), 0, 7);
    assert_eq!(run.reconfigurations(), 0, "{}", describe(&run));
    let rates = p.rates.decide();
    assert!(
        rates.risk < 1.3 * level,
        "{rates:?} at a steady {level:.0}/s"
    );
    let belief = p.p_feasible(safe, rates.risk).unwrap();
    assert!(
        belief >= config.risk_probability,
        "P(feasible) {belief} at {rates:?}"
    );
}

#[test]
fn a_risk_move_never_costs_more_than_a_sufficient_safe_default() {
    // Scaled down for 10k, then a rise the safe default carries: the risk moves may go up to
    // the safe default's cost, never beyond (they went to 36 cores against its 24).
    let safe = JobConfig::paper_default();
    let level = 0.7 * truth().capacity(&safe);
    let mut p = policy(8);
    let safe_cost = cost_share(&safe).0 + cost_share(&safe).1;
    let run = simulate(&mut p, &rise_to(level, 8), 0, 8);
    let risk_moves: Vec<&JobConfig> = run
        .actions
        .iter()
        .filter_map(|(_, a)| match a {
            Action::Reconfigure { to, decision, .. }
                if matches!(decision.reason, Reason::QosRisk { .. }) =>
            {
                Some(to)
            }
            _ => None,
        })
        .collect();
    assert!(!risk_moves.is_empty(), "{}", describe(&run));
    for to in risk_moves {
        let (cpu, memory) = cost_share(to);
        assert!(
            cpu + memory <= safe_cost + 1e-9,
            "{to}:\n{}",
            describe(&run)
        );
    }
}

#[test]
fn rejects_a_safe_default_outside_the_space() {
    let config = DemeterConfig {
        safe_default: Some("p=64,slots=1,mem=4096m,cpu=1,ckpt=10s".parse().unwrap()),
        ..DemeterConfig::default()
    };
    assert!(demeter_policy(SearchSpace::default(), QOS, config, 0).is_err());
    let bad = DemeterConfig {
        confidence: 1.5,
        ..DemeterConfig::default()
    };
    assert!(demeter_policy(SearchSpace::default(), QOS, bad, 0).is_err());
    let cheaper_than_safe = DemeterConfig {
        max_risk_cost: Some(0.5),
        ..DemeterConfig::default()
    };
    assert!(demeter_policy(SearchSpace::default(), QOS, cheaper_than_safe, 0).is_err());
}

#[test]
fn a_policy_file_names_only_what_it_changes_and_is_checked() {
    let config = DemeterConfig::from_toml("max_risk_cost = 1.5\nmin_dwell_s = 1800").unwrap();
    assert_eq!(config.max_risk_cost, Some(1.5));
    assert_eq!(config.min_dwell_s, 1_800);
    assert_eq!(config.horizon_s, DemeterConfig::default().horizon_s);
    assert!(DemeterConfig::from_toml("max_risk_cost = 0.5").is_err());
    assert!(DemeterConfig::from_toml("max_violation_factor = 0.5").is_err());
    assert!(DemeterConfig::from_toml("max_violation_factor = nan").is_err());
    assert!(DemeterConfig::from_toml("violation_budget = 1.0").is_err());
    assert!(DemeterConfig::from_toml("min_dwel_s = 1800").is_err());
}

fn describe(run: &Run) -> String {
    let mut out = String::new();
    for (t, a) in &run.actions {
        match a {
            Action::Reconfigure { to, kind, decision } => out.push_str(&format!(
                "t={t} reconfigure {to} {kind:?} {:?} fc={:?} chosen={:?} rejected={:?}\n",
                decision.reason, decision.forecast, decision.chosen, decision.best_rejected
            )),
            Action::Profile {
                candidates,
                rate,
                decision,
                ..
            } => out.push_str(&format!(
                "t={t} profile {} at {rate:.0}: {:?} {:?}\n",
                candidates
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
                decision.reason,
                decision.best_rejected.as_ref().map(|r| r.0.config)
            )),
        }
    }
    out.push_str(&format!(
        "over QoS {} of {} s (per 10 min from minute: {:?}), final {:?}\n",
        run.over_qos_s, run.seconds, run.over_by_10min, run.final_config
    ));
    out
}

#[test]
#[ignore = "prints a run for inspection"]
fn print_a_run() {
    let mut p = policy(2);
    let run = simulate(&mut p, &noisy(12_000.0, 4 * 3_600, 0.05, 2), 2_700, 2);
    eprintln!("{}", describe(&run));
    let mut rates = noisy(9_000.0, 3 * 3_600, 0.04, 3);
    rates.extend((0..1_200).map(|s| 9_000.0 + 13_000.0 * s as f64 / 1_200.0));
    rates.extend(noisy(22_000.0, 3_600, 0.04, 4));
    let run = simulate(&mut policy(3), &rates, 0, 3);
    eprintln!("{}", describe(&run));
}

#[test]
#[ignore = "prints true outcomes for inspection"]
fn print_truth() {
    let t = truth();
    for c in [
        "p=20,slots=1,mem=1024m,cpu=1,ckpt=10s",
        "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s",
        "p=12,slots=2,mem=3072m,cpu=1,ckpt=30s",
        "p=16,slots=2,mem=3072m,cpu=1,ckpt=30s",
    ] {
        let c: JobConfig = c.parse().unwrap();
        for r in [10_000.0, 14_000.0, 20_000.0, 30_000.0] {
            eprintln!("{c} @ {r}: {:?}", t.outcomes(&c, r));
        }
    }
}

/// The live demo replays an 18-h day in ~20 minutes: the CARS trace compressed 54 times (each
/// second the mean of 54), run through the twin with `DemeterConfig::compressed(54.0)`. The
/// policy must still act (scale down from the peak default while the rate is low) and keep the
/// QoS: a policy whose time constants stayed at their hour-long defaults never gets to decide
/// within the 20 minutes, and one that scales down without following the compressed rises
/// spends far more than the bound over the QoS.
///
/// KNOWN GAP (ignored until fixed, run with `--ignored`): at 54× the day's rises are ×3 within
/// 100 s, the forecasters' trends extrapolate them far beyond the peak, recoveries stay
/// uncertain (a couple of measurements), and the policy restarts 3 times for 8.7 % over the QoS
/// at a cost above static. The compressed configuration alone does not make it work.
#[test]
#[ignore = "known gap: the policy does not yet cope with a 54x compressed day (see the doc)"]
fn a_compressed_day_with_a_compressed_config_reconfigures_and_keeps_the_qos() {
    use crate::twin::testing;
    const FACTOR: usize = 54;
    let day = testing::trace_hours("CARS_3D_1S_4_sub_35K_max.csv", 18);
    let compressed: Vec<f64> = day
        .chunks(FACTOR)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect();
    // Two replays of the day: the first teaches the model (recoveries, profiling), the second
    // is where a working policy saves.
    let rates = [compressed.clone(), compressed].concat();
    let config = DemeterConfig {
        max_production_observations: 120,
        max_profiling_observations: 60,
        fit_restarts: 1,
        ..DemeterConfig::default().compressed(FACTOR as f64)
    };
    config.validate().unwrap();
    let mut p = demeter_policy(SearchSpace::default(), testing::QOS, config, 11).unwrap();
    let run = testing::run(
        &mut p,
        &rates,
        JobConfig::paper_default(),
        testing::options(11, Some(600), 0),
    );
    let s = &run.summary;
    let changes = s.changes.in_place + s.changes.full_restart;
    eprintln!(
        "compressed: cost {:.3}, >QoS {:.2} % ({:?}), changes {:?}, profiled {}/{}",
        s.cost,
        s.percent_over_latency,
        s.seconds_over_latency,
        s.changes,
        s.profiling_copies,
        s.profiling_batches
    );
    assert!(changes >= 1, "never reconfigured: {s:?}");
    assert!(s.production_cost < 0.9, "saved nothing: {s:?}");
    assert!(
        s.percent_over_latency <= 8.0,
        "{:.2} % over the QoS: {:?}",
        s.percent_over_latency,
        s.seconds_over_latency
    );
}

#[test]
fn compressing_divides_the_time_knobs_with_floors_and_keeps_the_rest() {
    let base = DemeterConfig::default();
    let c = base.compressed(54.0);
    c.validate().unwrap();
    assert_eq!(c.optimise_every_s, 60, "600 / 54 is floored at a minute");
    assert_eq!(c.risk_check_every_s, 10);
    assert_eq!(c.horizon_s, 300);
    assert_eq!(c.risk_horizon_s, 60);
    assert_eq!(c.peak_memory_s, 1_600);
    assert_eq!(c.season_s, 1_600);
    assert!(c.shape_dwell_s >= c.expected_dwell_s && c.expected_dwell_s >= 180);
    assert!(c.violation_seconds >= 1 && c.violation_seconds <= c.health_window_s);
    assert_eq!(c.confidence, base.confidence);
    assert_eq!(
        c.initial_restart_downtime_s,
        base.initial_restart_downtime_s
    );
    assert!(base.violation_budget > 0.0);
    assert_eq!(
        c.violation_budget, 0.0,
        "a compressed day inflates a change's share"
    );
    assert_eq!(base.compressed(1.0), base);
    assert_eq!(base.compressed(f64::NAN), base);
    // The forecasters' cadences follow the season.
    let f = c.forecast(c.horizon_s);
    assert!(f.validate().is_ok(), "{f:?}");
    assert_eq!(f.season.known_periods_s, vec![1_600]);
    let d = base.forecast(600);
    assert_eq!(
        (d.bucket_s, d.season.resolution_s, d.season.min_period_s),
        (10, 60, 1_200)
    );
}

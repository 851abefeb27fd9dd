//! Tests of the per-second job dynamics against closed forms of the ground truth.
#![allow(clippy::unwrap_used)]

use super::*;

fn truth() -> GroundTruth {
    GroundTruth::from_toml(include_str!("../../testdata/twin-benchmark.toml")).unwrap()
}

fn config(text: &str) -> JobConfig {
    text.parse().unwrap()
}

fn job(truth: GroundTruth, config: JobConfig) -> Job {
    Job::new(truth, SearchSpace::default(), config)
}

/// Steps `seconds` seconds from `from` at a constant rate; returns the seconds and events.
fn run(job: &mut Job, from: u64, seconds: u64, rate: f64) -> (Vec<Second>, Vec<JobEvent>) {
    let mut events = Vec::new();
    let out = (from..from + seconds)
        .map(|t| job.step(t, rate, &mut events))
        .collect();
    (out, events)
}

#[test]
fn backlog_drains_at_capacity_minus_rate() {
    for efficiency in [1.0, 1.1] {
        let mut truth = truth();
        truth.catchup_efficiency = efficiency;
        let c = config("p=8,slots=1,mem=4g,cpu=1,ckpt=30");
        let capacity = truth.capacity(&c);
        let mut job = job(truth, c);
        // Overload for 20 s to build a backlog, then run below capacity.
        run(&mut job, 0, 20, 2.0 * capacity);
        let rate = 0.5 * capacity;
        let (seconds, _) = run(&mut job, 20, 3, rate);
        for pair in seconds.windows(2) {
            let drained = pair[0].backlog - pair[1].backlog;
            let expected = efficiency * capacity - rate;
            assert!(
                (drained - expected).abs() < 1e-6 * capacity,
                "{drained} vs {expected}"
            );
            assert!(pair[1].latency_ms > pair[1].backlog / capacity * 900.0);
        }
    }
}

#[test]
fn below_capacity_nothing_waits() {
    let truth = truth();
    let c = JobConfig::paper_default();
    let rate = 0.6 * truth.capacity(&c);
    let steady = truth.outcomes(&c, rate).latency_p95_ms;
    let mut job = job(truth, c);
    let (seconds, events) = run(&mut job, 0, 100, rate);
    assert!(events.is_empty());
    for s in &seconds {
        assert_eq!(s.backlog, 0.0);
        assert_eq!(s.phase, SimPhase::Running);
        assert!((s.latency_ms - steady).abs() < 1e-9);
        assert_eq!(s.cpu_alloc, c.total_cpu_cores());
    }
}

/// Recovery measured by the simulation vs the closed form: downtime D, then the input of D
/// plus the replay since the last checkpoint drained at `efficiency · capacity − rate`.
#[test]
fn failure_recovery_matches_the_closed_form() {
    let truth = truth();
    let c = JobConfig::paper_default();
    let rate = 20_000.0;
    let capacity = truth.capacity(&c);
    let downtime = truth.failure_downtime_s(&c);
    let spare = truth.catchup_efficiency * capacity - rate;
    let interval = f64::from(c.checkpoint_interval_s);
    let closed = |replay_s: f64| downtime + rate * (downtime + replay_s) / spare;
    // The truth's own recovery assumes a failure just before a checkpoint (a full interval).
    assert!((truth.outcomes(&c, rate).recovery_s - closed(interval)).abs() < 1e-9);

    // 600 is a checkpoint instant (every 10 s from 0): nothing to replay; 599: 9 s to replay.
    for (fail_at, replay_s) in [(600_u64, 0.0), (599, interval - 1.0)] {
        let mut job = job(truth.clone(), c);
        run(&mut job, 0, fail_at, rate);
        let mut events = Vec::new();
        job.fail(fail_at as f64, &mut events);
        let (seconds, events) = run(&mut job, fail_at, 400, rate);
        let recoveries: Vec<f64> = events
            .iter()
            .filter_map(|e| match e {
                JobEvent::Recovered {
                    recovery_s,
                    censored: false,
                    ..
                } => Some(*recovery_s),
                _ => None,
            })
            .collect();
        assert_eq!(recoveries.len(), 1, "{events:?}");
        assert!(
            (recoveries[0] - closed(replay_s)).abs() < 0.5,
            "fail at {fail_at}: {} vs {}",
            recoveries[0],
            closed(replay_s)
        );
        let down: f64 = seconds.iter().map(|s| 1.0 - s.running_fraction).sum();
        assert!((down - downtime).abs() < 1e-9, "{down} vs {downtime}");
        assert_eq!(seconds[0].phase, SimPhase::Failed);
        assert!(seconds[0].latency_ms > 1000.0);
    }
}

#[test]
fn a_full_restart_costs_its_downtime_and_the_catch_up() {
    let truth = truth();
    let from = JobConfig::paper_default();
    let to = config("p=12,slots=2,mem=4g,cpu=2,ckpt=30");
    let mut job = job(truth.clone(), from);
    run(&mut job, 0, 100, 15_000.0);
    assert_eq!(job.reconfigure(100.0, to), Ok(ChangeKind::FullRestart));
    assert!(job.changing());
    let (seconds, events) = run(&mut job, 100, 200, 15_000.0);
    let expected = truth.full_restart_downtime_s(&from, &to);
    let down: f64 = seconds.iter().map(|s| 1.0 - s.running_fraction).sum();
    assert!((down - expected).abs() < 1e-9, "{down} vs {expected}");
    let outcome = events
        .iter()
        .find_map(|e| match e {
            JobEvent::Reconfigured { outcome, kind, .. } => {
                assert_eq!(*kind, ChangeKind::FullRestart);
                Some(*outcome)
            }
            _ => None,
        })
        .unwrap();
    assert!(outcome.succeeded);
    assert_eq!(outcome.running, to);
    assert!((outcome.downtime_s - expected).abs() < 1e-9);
    // The input of the downtime waited, then was caught up (no replay: savepoint).
    let peak = seconds.iter().map(|s| s.backlog).fold(0.0, f64::max);
    assert!((peak - 15_000.0 * expected.ceil()).abs() < 15_000.0 * 1.01);
    assert_eq!(seconds.last().unwrap().backlog, 0.0);
    assert_eq!(seconds.last().unwrap().config, to);
    // Allocation: the old shape during the savepoint, the new one after.
    assert_eq!(seconds[0].cpu_alloc, from.total_cpu_cores());
    assert_eq!(seconds.last().unwrap().cpu_alloc, to.total_cpu_cores());
}

#[test]
fn an_in_place_scale_up_prepares_while_running() {
    let truth = truth();
    let from = config("p=8,slots=1,mem=4g,cpu=1,ckpt=10");
    let to = config("p=16,slots=1,mem=4g,cpu=1,ckpt=10");
    let mut job = job(truth.clone(), from);
    assert_eq!(job.reconfigure(0.0, to), Ok(ChangeKind::InPlace));
    let (seconds, events) = run(&mut job, 0, 60, 10_000.0);
    let prepare = truth.tm_start_s as usize;
    assert!(
        seconds[..prepare]
            .iter()
            .all(|s| s.phase == SimPhase::Preparing
                && s.running_fraction == 1.0
                && s.cpu_alloc == to.total_cpu_cores())
    );
    let down: f64 = seconds.iter().map(|s| 1.0 - s.running_fraction).sum();
    assert!((down - truth.in_place_downtime_s(&to)).abs() < 1e-9);
    assert!(matches!(
        events[0],
        JobEvent::Reconfigured { outcome, .. } if outcome.succeeded && outcome.running == to
    ));
}

#[test]
fn a_configuration_that_cannot_run_is_rolled_back() {
    let truth = truth();
    let from = JobConfig::paper_default();
    // 512 MB over 4 slots: below the search space's 256 MB per slot.
    let bad = config("p=8,slots=4,mem=512m,cpu=1,ckpt=10");
    let mut job = job(truth.clone(), from);
    assert_eq!(job.reconfigure(0.0, bad), Ok(ChangeKind::FullRestart));
    let (seconds, events) = run(&mut job, 0, 300, 10_000.0);
    let outcome = events
        .iter()
        .find_map(|e| match e {
            JobEvent::Reconfigured { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .unwrap();
    assert!(!outcome.succeeded);
    assert_eq!(outcome.running, from);
    assert!(outcome.downtime_s > truth.full_restart_downtime_s(&from, &from));
    assert_eq!(seconds.last().unwrap().config, from);
    assert_eq!(job.config(), from);
}

#[test]
fn a_second_change_is_refused_and_failures_wait_for_the_change() {
    let truth = truth();
    let from = JobConfig::paper_default();
    let to = config("p=12,slots=2,mem=4g,cpu=2,ckpt=30");
    let mut job = job(truth.clone(), from);
    job.reconfigure(0.0, to).unwrap();
    let refused = job.reconfigure(1.0, from).unwrap_err();
    assert!(!refused.succeeded);
    let mut events = Vec::new();
    job.fail(2.0, &mut events);
    let (seconds, events) = run(&mut job, 0, 400, 10_000.0);
    let change_end = truth.full_restart_downtime_s(&from, &to);
    let failed: Vec<&Second> = seconds
        .iter()
        .filter(|s| s.phase == SimPhase::Failed)
        .collect();
    assert!(!failed.is_empty());
    assert!(failed[0].t as f64 >= change_end.floor());
    assert!(
        events
            .iter()
            .any(|e| matches!(e, JobEvent::Recovered { .. }))
    );
}

#[test]
fn disruption_spans_a_change_until_caught_up_and_a_failure_until_drained() {
    let truth = truth();
    let from = JobConfig::paper_default();
    let to = config("p=12,slots=2,mem=4g,cpu=2,ckpt=30");
    let mut job = job(truth.clone(), from);
    let (steady, _) = run(&mut job, 0, 10, 15_000.0);
    assert!(steady.iter().all(|s| s.disruption == Disruption::None));
    job.reconfigure(10.0, to).unwrap();
    let (seconds, _) = run(&mut job, 10, 300, 15_000.0);
    // The change disrupts from its start through the catch-up, and not a second longer.
    let last = seconds
        .iter()
        .rposition(|s| s.disruption == Disruption::Change)
        .unwrap();
    assert!(
        seconds[..=last]
            .iter()
            .all(|s| s.disruption == Disruption::Change)
    );
    assert!(seconds[last].backlog == 0.0 && seconds[last - 1].backlog > 0.0);
    assert!(
        seconds[last + 1..]
            .iter()
            .all(|s| s.disruption == Disruption::None)
    );
    assert!(last as f64 > truth.full_restart_downtime_s(&from, &to));

    let mut events = Vec::new();
    job.fail(310.0, &mut events);
    let (seconds, events) = run(&mut job, 310, 300, 15_000.0);
    let recovery = events
        .iter()
        .find_map(|e| match e {
            JobEvent::Recovered { recovery_s, .. } => Some(*recovery_s),
            _ => None,
        })
        .unwrap();
    let failed = seconds
        .iter()
        .filter(|s| s.disruption == Disruption::Failure { since: 310.0 })
        .count();
    assert_eq!(failed, recovery.ceil() as usize, "{recovery}");
    assert!(
        seconds[failed..]
            .iter()
            .all(|s| s.disruption == Disruption::None)
    );
}

//! The recorder's split of seconds over the latency QoS by cause.
#![allow(clippy::unwrap_used)]

use super::*;

const QOS: Qos = Qos {
    latency_p95_ms: 500.0,
    recovery_s: 180.0,
};

fn second(t: u64, latency_ms: f64, disruption: Disruption) -> Second {
    let config = JobConfig::paper_default();
    Second {
        t,
        rate: 1000.0,
        processed: 1000.0,
        backlog: 0.0,
        phase: SimPhase::Running,
        config,
        capacity: 50_000.0,
        running_fraction: 1.0,
        latency_ms,
        cpu_alloc: config.total_cpu_cores(),
        memory_alloc_mb: config.total_memory_mb(),
        disruption,
    }
}

#[test]
fn seconds_over_the_latency_qos_are_split_by_cause() {
    let mut recorder = Recorder::new(QOS, 100);
    let failure = Disruption::Failure { since: 100.0 };
    // 100 calm seconds, 3 of them over the QoS (steady).
    for t in 0..100 {
        let latency = if t < 3 { 900.0 } else { 100.0 };
        recorder.second(&second(t, latency, Disruption::None), (0.0, 0.0), None);
    }
    // A failure recovery of 250 s, over the QoS throughout: 180 s are excused, 70 are steady.
    for t in 100..350 {
        recorder.second(&second(t, 900.0, failure), (0.0, 0.0), None);
    }
    // A change: 40 s disrupted, 30 of them over.
    for t in 350..390 {
        let latency = if t < 380 { 900.0 } else { 100.0 };
        recorder.second(&second(t, latency, Disruption::Change), (0.0, 0.0), None);
    }
    let last = second(389, 100.0, Disruption::None);
    let s = recorder.finish(
        "test",
        JobConfig::paper_default(),
        ProfilingStats::default(),
        (30.0, 120_000.0),
        Some(&last),
    );
    let o = s.seconds_over_latency;
    assert_eq!(
        (o.steady, o.failure_recovery, o.change, o.total),
        (73, 180, 30, 283)
    );
    assert_eq!(s.seconds_in_failure_recovery, 180);
    assert_eq!(s.seconds_in_changes, 40);
    let outside = (390 - 180) as f64;
    assert!((s.percent_over_latency - 100.0 * 103.0 / outside).abs() < 1e-9);
    assert!((s.percent_over_latency_incl_failures - 100.0 * 283.0 / 390.0).abs() < 1e-9);
    // The timeline's windows carry the same split.
    let rows = &recorder.timeline.rows;
    let sum = |f: fn(&TimelineRow) -> u32| rows.iter().map(f).sum::<u32>();
    assert_eq!(sum(|r| r.over_qos_steady_s), 73);
    assert_eq!(sum(|r| r.over_qos_failure_s), 180);
    assert_eq!(sum(|r| r.over_qos_change_s), 30);
}

#![allow(clippy::unwrap_used)]

use super::*;
use crate::profiler::measure::{CheckpointTiming, VertexBusy};
use crate::profiler::plan::Resources;

const T0: u64 = 1_800_000_000_000;

fn times() -> Times {
    Times {
        start_deadline_ms: 60_000,
        running_deadline_ms: 30_000,
        warmup_ms: 20_000,
        measure_ms: 20_000,
        sample_every_ms: 1_000,
        kill_margin_ms: 1_000,
        checkpoint_wait_ms: 15_000,
        max_recovery_ms: 40_000,
        teardown_deadline_ms: 30_000,
        ..Times::default()
    }
}

fn config() -> JobConfig {
    "p=2,slots=2,mem=1280m,cpu=1,ckpt=5s".parse().unwrap()
}

/// A scripted Flink copy: what each effect answers, as a function of time.
#[derive(Debug, Clone)]
struct Fake {
    provision_fails: bool,
    /// The TaskManager dies while the copy waits for it to register.
    taskmanager_exits: bool,
    register_after: Option<u64>,
    running_after: Option<u64>,
    down_after_kill: u64,
    recovers: bool,
    teardown_fails: bool,
    /// Checkpoints trigger at `ckpt_first + k × 5 s` (None: never complete).
    ckpt_first: Option<u64>,
    latency: Option<f64>,
    busy: f64,
    rate: f64,
    provisioned_at: Option<u64>,
    submitted_at: Option<u64>,
    killed_at: Option<u64>,
    effects: Vec<(u64, Effect)>,
    /// `keep_logs` of the tear-down the machine ordered.
    keep_logs: Option<bool>,
}

impl Default for Fake {
    fn default() -> Self {
        Fake {
            provision_fails: false,
            taskmanager_exits: false,
            register_after: Some(8_000),
            running_after: Some(4_000),
            down_after_kill: 6_000,
            recovers: true,
            teardown_fails: false,
            ckpt_first: Some(T0 + 30_300),
            latency: Some(120.0),
            busy: 0.4,
            rate: 500.0,
            provisioned_at: None,
            submitted_at: None,
            killed_at: None,
            effects: Vec::new(),
            keep_logs: None,
        }
    }
}

impl Fake {
    fn run_start(&self, now: u64) -> Option<u64> {
        let first = self.submitted_at? + self.running_after?;
        if now < first {
            return None;
        }
        match self.killed_at {
            Some(k) if now < k + self.down_after_kill || !self.recovers => None,
            Some(k) => Some(k + self.down_after_kill),
            None => Some(first),
        }
    }

    fn answer(&mut self, now: u64, effect: &Effect) -> Event {
        self.effects.push((now, effect.clone()));
        let fail = |m: &str| Event::Failed {
            message: m.to_string(),
        };
        match effect {
            Effect::Provision if self.provision_fails => fail("jobmanager.sh exited with 1"),
            Effect::Provision => {
                self.provisioned_at = Some(now);
                Event::Provisioned
            }
            Effect::CheckCluster if self.taskmanager_exits => Event::Exited {
                what: "TaskManager prof-b1-c0-tm0 exited before it registered".into(),
            },
            Effect::CheckCluster => {
                let up = self
                    .register_after
                    .is_some_and(|d| now >= self.provisioned_at.unwrap() + d);
                Event::Cluster {
                    taskmanagers: u32::from(up),
                    slots: if up { 2 } else { 0 },
                }
            }
            Effect::Submit => {
                self.submitted_at = Some(now);
                Event::Submitted
            }
            Effect::Kill { .. } => {
                self.killed_at = Some(now);
                Event::Killed { at_ms: now }
            }
            Effect::TearDown { .. } if self.teardown_fails => fail("port 18500 still bound"),
            Effect::TearDown { .. } => Event::TornDown,
            Effect::Sample => Event::Sample(Box::new(self.sample(now))),
        }
    }

    fn sample(&self, now: u64) -> CopySample {
        let start = self.run_start(now);
        let up_ms = start.map_or(0, |s| now - s) as f64;
        let restarts = f64::from(
            self.killed_at
                .is_some_and(|k| now >= k + self.down_after_kill && self.recovers),
        );
        let last_trigger = self
            .ckpt_first
            .and_then(|f| (now >= f + 200).then(|| f + (now - f - 200) / 5_000 * 5_000));
        CopySample {
            fully_running: start.is_some(),
            parallelism: vec![2, 2],
            restarts,
            source_records: self.rate * up_ms / 1000.0,
            busy: vec![VertexBusy {
                parallelism: 2,
                accumulated_busy_ms: Some(self.busy * 2.0 * up_ms),
                busy_ms_per_second: Some(900.0),
            }],
            source_backpressure_ms: Some(0.0),
            latency_p95_ms: self.latency,
            checkpoint: Some(CheckpointTiming {
                last_completed_trigger_ms: last_trigger,
                interval_ms: 5_000,
            }),
            usage: Some(Resources {
                cpu_cores: 0.8,
                memory_mb: 900.0,
            }),
        }
    }
}

/// Runs the machine against the fake until done (or `until` says stop), advancing time to
/// each timeout. Returns the machine.
fn run(fake: &mut Fake, mut until: impl FnMut(&CopyMachine, u64) -> bool) -> CopyMachine {
    let mut m = CopyMachine::new(T0, "prof-b1-c0", config(), 500.0, "prof-b1-c0-tm0", times());
    let mut now = T0;
    for _ in 0..10_000 {
        while let Some(e) = m.poll_effect() {
            now += 100; // every effect takes a little time
            if let Effect::TearDown { keep_logs } = e {
                fake.keep_logs = Some(keep_logs);
            }
            let event = fake.answer(now, &e);
            m.handle_event(now, &e, event);
        }
        if m.is_done() || until(&m, now) {
            return m;
        }
        let next = m
            .poll_timeout()
            .expect("a machine that is not done has a timeout");
        assert!(
            next >= now.saturating_sub(1),
            "timeout in the past: {next} < {now}"
        );
        now = next.max(now);
        m.handle_timeout(now);
    }
    panic!("did not finish: {:?}", m.phase());
}

fn kinds(fake: &Fake) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (_, e) in &fake.effects {
        let k = match e {
            Effect::Provision => "provision",
            Effect::CheckCluster => "check",
            Effect::Submit => "submit",
            Effect::Sample => "sample",
            Effect::Kill { .. } => "kill",
            Effect::TearDown { .. } => "teardown",
        };
        if out.last() != Some(&k) {
            out.push(k);
        }
    }
    out
}

#[test]
fn full_run_measures_kills_before_a_checkpoint_times_recovery_and_tears_down() {
    let mut fake = Fake::default();
    let m = run(&mut fake, |_, _| false);
    assert_eq!(
        kinds(&fake),
        [
            "provision",
            "check",
            "submit",
            "sample",
            "kill",
            "sample",
            "teardown"
        ]
    );
    let r = m.report().unwrap();
    let CopyOutcome::Measured(o) = r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert!((o.rate - 500.0).abs() < 1.0, "{}", o.rate);
    assert!(
        (o.busy_fraction.unwrap() - 0.4).abs() < 1e-6,
        "{:?}",
        o.busy_fraction
    );
    assert_eq!(o.latency_p95_ms, 120.0);
    assert!((o.cpu_cores - 0.8).abs() < 1e-9 && (o.memory_mb - 900.0).abs() < 1e-9);
    let rec = r.recovery.unwrap();
    assert!(!rec.censored);
    assert!(rec.running_ms >= fake.down_after_kill && rec.drained_ms >= rec.flowing_ms);
    assert_eq!(o.recovery_s, Some(rec.drained_ms as f64 / 1000.0));
    // The kill was ordered 1 s (the margin) before a checkpoint trigger (the fake's effects
    // take 100 ms).
    let kill = fake.killed_at.unwrap();
    let first = fake.ckpt_first.unwrap();
    assert_eq!(
        (kill - 100 + 1_000 - first) % 5_000,
        0,
        "kill at {}",
        kill - T0
    );
    // Warm-up and measurement both ran their full length before the kill.
    let running = fake.submitted_at.unwrap() + 4_000;
    assert!(kill >= running + 40_000);
    assert!(r.startup_ms.unwrap() >= 12_000, "{:?}", r.startup_ms);
    assert_eq!(r.teardown_error, None);
    assert_eq!(
        fake.keep_logs,
        Some(false),
        "a measured copy's logs go with it"
    );
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn a_copy_that_fails_to_start_is_reported_failed_and_still_torn_down() {
    let mut fake = Fake {
        provision_fails: true,
        ..Fake::default()
    };
    let m = run(&mut fake, |_, _| false);
    assert_eq!(kinds(&fake), ["provision", "teardown"]);
    assert_eq!(fake.keep_logs, Some(true), "its logs are kept");
    let r = m.report().unwrap();
    assert!(
        matches!(&r.outcome, CopyOutcome::Failed(m) if m.contains("jobmanager.sh")),
        "{:?}",
        r.outcome
    );
    assert_eq!(r.startup_ms, None);
}

#[test]
fn deadlines_tear_down_taskmanagers_that_never_register_or_a_job_that_never_runs() {
    for (fake, phase) in [
        (
            Fake {
                register_after: None,
                ..Fake::default()
            },
            "Registering",
        ),
        (
            Fake {
                running_after: None,
                ..Fake::default()
            },
            "Starting",
        ),
    ] {
        let mut fake = fake;
        let m = run(&mut fake, |_, _| false);
        let r = m.report().unwrap();
        assert!(
            matches!(&r.outcome, CopyOutcome::Failed(msg) if msg.contains("deadline") && msg.contains(phase)),
            "{:?}",
            r.outcome
        );
        assert_eq!(kinds(&fake).last(), Some(&"teardown"));
        assert_eq!(fake.keep_logs, Some(true), "{phase}: its logs are kept");
        assert!(
            !fake
                .effects
                .iter()
                .any(|(_, e)| matches!(e, Effect::Kill { .. }))
        );
    }
}

#[test]
fn a_taskmanager_that_exits_fails_the_copy_at_once_not_at_the_deadline() {
    let mut fake = Fake {
        taskmanager_exits: true,
        ..Fake::default()
    };
    let m = run(&mut fake, |_, _| false);
    let r = m.report().unwrap();
    assert!(
        matches!(&r.outcome, CopyOutcome::Failed(msg) if msg.contains("prof-b1-c0-tm0 exited")),
        "{:?}",
        r.outcome
    );
    assert_eq!(kinds(&fake), ["provision", "check", "teardown"]);
    assert!(r.finished_ms - T0 < times().start_deadline_ms / 10, "{r:?}");
    assert_eq!(fake.keep_logs, Some(true), "its logs are kept");
}

#[test]
fn recovery_longer_than_the_cap_is_reported_as_the_cap() {
    let mut fake = Fake {
        recovers: false,
        ..Fake::default()
    };
    let m = run(&mut fake, |_, _| false);
    let r = m.report().unwrap();
    let rec = r.recovery.unwrap();
    assert!(rec.censored);
    assert_eq!(rec.drained_ms, times().max_recovery_ms);
    let CopyOutcome::Measured(o) = r.outcome else {
        panic!()
    };
    assert_eq!(o.recovery_s, Some(40.0));
    assert_eq!(kinds(&fake).last(), Some(&"teardown"));
}

#[test]
fn abort_tears_down_at_once_and_ignores_the_answer_in_flight() {
    let mut fake = Fake::default();
    let mut m = run(&mut fake, |m, _| m.phase() == Phase::Measuring);
    let now = T0 + 1_000_000;
    // A reading is in flight when production asks for the resources back.
    m.handle_timeout(m.poll_timeout().unwrap());
    let in_flight = m.poll_effect().unwrap();
    assert_eq!(in_flight, Effect::Sample);
    m.abort(now, "production needs the memory");
    let tear_down = Effect::TearDown { keep_logs: false };
    assert_eq!(m.poll_effect(), Some(tear_down.clone()));
    m.handle_event(
        now + 10,
        &in_flight,
        Event::Sample(Box::new(fake.sample(now))),
    );
    assert_eq!(m.phase(), Phase::TearingDown);
    m.handle_event(now + 20, &tear_down, Event::TornDown);
    let r = m.report().unwrap();
    assert_eq!(
        r.outcome,
        CopyOutcome::Aborted("production needs the memory".into())
    );
    m.abort(now + 30, "again");
    assert_eq!(
        m.report().unwrap().outcome,
        r.outcome,
        "abort after the end changes nothing"
    );
}

#[test]
fn teardown_failure_or_silence_is_reported_and_the_machine_still_ends() {
    let mut fake = Fake {
        provision_fails: true,
        teardown_fails: true,
        ..Fake::default()
    };
    let r = run(&mut fake, |_, _| false).report().unwrap();
    assert_eq!(r.teardown_error.as_deref(), Some("port 18500 still bound"));

    let mut m = CopyMachine::new(T0, "c", config(), 1.0, "c-tm0", times());
    let e = m.poll_effect().unwrap();
    m.handle_event(
        T0 + 1,
        &e,
        Event::Failed {
            message: "no java".into(),
        },
    );
    assert_eq!(m.poll_effect(), Some(Effect::TearDown { keep_logs: true }));
    // The tear-down never answers.
    let deadline = m.poll_timeout().unwrap();
    assert_eq!(deadline, T0 + 1 + times().teardown_deadline_ms);
    m.handle_timeout(deadline);
    assert!(m.is_done());
    assert!(
        m.report()
            .unwrap()
            .teardown_error
            .unwrap()
            .contains("not confirmed")
    );
}

#[test]
fn without_checkpoints_the_kill_still_happens_after_the_wait() {
    let mut fake = Fake {
        ckpt_first: None,
        ..Fake::default()
    };
    let m = run(&mut fake, |_, _| false);
    let r = m.report().unwrap();
    assert!(fake.killed_at.is_some());
    assert_eq!(r.recovery.unwrap().before_checkpoint_ms, None);
    assert!(matches!(r.outcome, CopyOutcome::Measured(_)));
}

#[test]
fn no_latency_metric_means_no_measurement() {
    let mut fake = Fake {
        latency: None,
        ..Fake::default()
    };
    let r = run(&mut fake, |_, _| false).report().unwrap();
    assert!(
        matches!(&r.outcome, CopyOutcome::Failed(m) if m.contains("latency")),
        "{:?}",
        r.outcome
    );
    assert!(fake.killed_at.is_none());
}

#[test]
fn a_restart_during_measurement_starts_warm_up_again() {
    let mut fake = Fake::default();
    let mut m = run(&mut fake, |m, _| m.phase() == Phase::Measuring);
    // The job restarts (as if a TaskManager died on its own) halfway through the window.
    let t = m.poll_timeout().unwrap();
    fake.killed_at = Some(t);
    fake.down_after_kill = 3_000;
    m.handle_timeout(t);
    let e = m.poll_effect().unwrap();
    let event = fake.answer(t, &e);
    m.handle_event(t, &e, event);
    assert_eq!(m.phase(), Phase::Starting);
}

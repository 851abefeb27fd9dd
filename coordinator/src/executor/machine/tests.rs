//! The machine against a simulated Flink and TaskManager backend (`sim.rs`), with failures
//! injected at every step and crashes (resume from the journal) after every effect.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::effects::{Effect, Event, Fault};
use super::super::operation::{Outcome, Phase, Step};
use super::super::plan::Strategy;
use super::Limits;
use super::sim::{Sim, cfg};
use crate::flink::JobState;

fn restart_sim() -> Sim {
    Sim::running("p=2,slots=2,mem=1g,cpu=1,ckpt=5")
}

fn assert_outcome(op: &super::super::operation::Operation, kind: &str) {
    let got = format!("{:?}", op.outcome());
    assert!(
        got.starts_with(&format!("Some({kind}")),
        "{got}\n{:#?}",
        op.log
    );
}

const TO: &str = "p=2,slots=2,mem=1536m,cpu=1,ckpt=10";

#[test]
fn restart_goes_stop_taskmanagers_submit_and_runs_from_the_savepoint() {
    let mut sim = restart_sim();
    let op = sim.run(Strategy::Restart, TO);
    let Some(Outcome::Applied(d)) = op.outcome() else {
        panic!("{:?}", op.phase)
    };
    assert_eq!(d.config, cfg(TO));
    let steps: Vec<_> = op.step_durations().into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        steps,
        [
            "stop",
            "taskmanagers",
            "wait-taskmanagers",
            "submit",
            "wait-running"
        ]
    );
    let job = &sim.jobs[&d.job_id];
    assert_eq!(job.state, JobState::Running);
    assert_eq!(job.restored_from.as_deref(), op.savepoint.as_deref());
    assert_eq!(sim.jobs[&sim.first_job].state, JobState::Finished);
    assert!(sim.tms.iter().all(|t| t.memory_mb == 1536));
    sim.assert_invariants();
}

#[test]
fn in_place_rescales_the_same_job() {
    let mut sim = Sim::running("p=1,slots=2,mem=1g,cpu=1,ckpt=5");
    let op = sim.run(Strategy::InPlace, "p=2,slots=2,mem=1g,cpu=1,ckpt=5");
    assert_eq!(
        op.outcome(),
        Some(&Outcome::Applied(super::super::operation::Deployment {
            config: cfg("p=2,slots=2,mem=1g,cpu=1,ckpt=5"),
            job_id: sim.first_job.clone(),
            taskmanagers: None,
        }))
    );
    assert_eq!(sim.jobs[&sim.first_job].parallelism, 2);
    assert!(op.savepoint.is_none());
    sim.assert_invariants();
}

#[test]
fn first_deployment_starts_taskmanagers_and_submits_without_restore() {
    let mut sim = Sim::empty();
    let op = sim.run(Strategy::Initial, TO);
    let Some(Outcome::Applied(d)) = op.outcome() else {
        panic!("{:?}", op.phase)
    };
    assert_eq!(sim.jobs[&d.job_id].restored_from, None);
    sim.assert_invariants();
}

/// A step of a restart fails in each possible way: the job comes back in the old
/// configuration from the same savepoint.
#[test]
fn every_forward_failure_of_a_restart_rolls_back_from_the_same_savepoint() {
    type Inject = fn(&mut Sim);
    let cases: [(&str, Inject); 5] = [
        ("ensure fails", |s| s.fail_ensure_for_mb = Some(1536)),
        ("TaskManager refuses its memory", |s| {
            s.die_at_mb = Some(1536)
        }),
        ("TaskManagers never register", |s| {
            s.unregistered_mb = Some(1536)
        }),
        ("submission refused", |s| s.refuse_submit = true),
        ("job fails", |s| s.fail_new_jobs = true),
    ];
    for (name, inject) in cases {
        let mut sim = restart_sim();
        inject(&mut sim);
        let op = sim.run(Strategy::Restart, TO);
        let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
            panic!("{name}: {:?}\n{:#?}", op.phase, op.log)
        };
        assert_eq!(
            deployment.config,
            cfg("p=2,slots=2,mem=1g,cpu=1,ckpt=5"),
            "{name}"
        );
        let job = &sim.jobs[&deployment.job_id];
        assert_eq!(job.state, JobState::Running, "{name}");
        assert_eq!(job.restored_from, op.savepoint, "{name}: same savepoint");
        assert!(sim.tms.iter().all(|t| t.memory_mb == 1024), "{name}");
        sim.assert_invariants();
    }
}

#[test]
fn a_new_job_that_checkpointed_is_rolled_back_from_its_newest_snapshot() {
    // Running at the wrong parallelism after taking checkpoints: stopped with a savepoint.
    let mut sim = restart_sim();
    sim.stuck_parallelism = Some(1);
    sim.checkpoint_new_jobs = true;
    let op = sim.run(Strategy::Restart, TO);
    let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
        panic!("{:?}", op.phase)
    };
    let restored = sim.jobs[&deployment.job_id].restored_from.clone().unwrap();
    assert_ne!(Some(&restored), op.savepoint.as_ref());
    assert!(
        restored.starts_with("sp-"),
        "a savepoint of the new job: {restored}"
    );
    sim.assert_invariants();

    // Restarting (cannot take a savepoint): cancelled, restored from its newest checkpoint.
    let mut sim = restart_sim();
    sim.new_jobs_restart = true;
    sim.checkpoint_new_jobs = true;
    let op = sim.run(Strategy::Restart, TO);
    let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
        panic!("{:?}", op.phase)
    };
    let restored = sim.jobs[&deployment.job_id].restored_from.clone().unwrap();
    assert!(restored.starts_with("chk-"), "{restored}");
    sim.assert_invariants();
}

#[test]
fn a_stop_whose_answer_was_lost_is_resolved_from_the_job() {
    // Flink stopped the job; the answer never came back.
    let mut sim = restart_sim();
    sim.lose_stop_answer = true;
    let op = sim.run(Strategy::Restart, TO);
    assert_outcome(&op, "Applied");
    assert!(
        op.log
            .iter()
            .any(|l| l.text.contains("resolve-stop: stopped"))
    );
    sim.assert_invariants();

    // The request never reached Flink: nothing changed, the old job runs on.
    let mut sim = restart_sim();
    sim.refuse_stop = true;
    let op = sim.run(Strategy::Restart, TO);
    assert_outcome(&op, "Aborted");
    assert_eq!(sim.jobs[&sim.first_job].state, JobState::Running);
    assert_eq!(sim.jobs.len(), 1, "nothing submitted");
    sim.assert_invariants();
}

#[test]
fn a_failed_or_slow_savepoint_leaves_the_old_job_running() {
    for slow in [false, true] {
        let mut sim = restart_sim();
        if slow {
            sim.savepoint_never_completes = true;
        } else {
            sim.savepoint_fails = true;
        }
        let op = sim.run(Strategy::Restart, TO);
        assert_outcome(&op, "Aborted");
        assert_eq!(sim.jobs[&sim.first_job].state, JobState::Running);
        assert_eq!(sim.jobs.len(), 1);
        sim.assert_invariants();
    }
}

#[test]
fn a_declined_savepoint_is_asked_again_while_the_job_runs_on() {
    // Flink declines a stop-with-savepoint while a task is not running yet (right after an
    // in-place rescale, seen on real Flink in CI); the job runs on, so the stop is retried.
    let mut sim = restart_sim();
    sim.savepoints_declined = 1;
    let op = sim.run(Strategy::Restart, TO);
    assert_outcome(&op, "Applied");
    assert_eq!(sim.jobs[&sim.first_job].state, JobState::Finished);
    sim.assert_invariants();

    // Declined every time: a bounded number of retries, then the old job runs on.
    let mut sim = restart_sim();
    sim.savepoints_declined = 10;
    let op = sim.run(Strategy::Restart, TO);
    assert_outcome(&op, "Aborted");
    assert_eq!(sim.jobs[&sim.first_job].state, JobState::Running);
    assert_eq!(sim.jobs.len(), 1);
    sim.assert_invariants();
}

#[test]
fn a_submission_whose_answer_was_lost_is_found_by_its_job_id() {
    let mut sim = restart_sim();
    sim.lose_submit_answer = true;
    let op = sim.run(Strategy::Restart, TO);
    assert_outcome(&op, "Applied");
    assert_eq!(sim.jobs.len(), 2, "one old, one new job: no duplicate");
    sim.assert_invariants();
}

#[test]
fn in_place_failures_roll_back_in_place() {
    for rescale_fails in [true, false] {
        let mut sim = Sim::running("p=1,slots=2,mem=1g,cpu=1,ckpt=5");
        if rescale_fails {
            sim.fail_rescale_to = Some(2);
        } else {
            sim.stuck_parallelism = Some(1);
            sim.stuck_only_for = Some(2);
        }
        let op = sim.run(Strategy::InPlace, "p=2,slots=2,mem=1g,cpu=1,ckpt=5");
        let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
            panic!("{:?}", op.phase)
        };
        assert_eq!(deployment.job_id, sim.first_job);
        assert_eq!(sim.jobs[&sim.first_job].parallelism, 1);
        sim.assert_invariants();
    }
}

#[test]
fn a_failing_rollback_is_retried_with_growing_backoff_and_alerts_until_it_works() {
    let mut sim = restart_sim();
    sim.refuse_submit = true;
    sim.refuse_submit_until_attempt = 4;
    let op = sim.run(Strategy::Restart, TO);
    let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
        panic!("{:?}", op.phase)
    };
    assert_eq!(sim.jobs[&deployment.job_id].state, JobState::Running);
    assert_eq!(sim.alerts.len(), 3, "{:?}", sim.alerts);
    let retries: Vec<u64> = sim
        .journal
        .iter()
        .filter_map(|o| match o.phase {
            Phase::RollingBack {
                retry_at_ms: Some(at),
                ..
            } => Some(at - o.step_started_ms),
            _ => None,
        })
        .collect();
    assert!(retries.len() >= 3);
    let l = Limits::default();
    assert_eq!(
        (l.backoff(1), l.backoff(2), l.backoff(3)),
        (5_000, 10_000, 20_000)
    );
    assert_eq!(l.backoff(30), l.rollback_backoff_max_ms);
    sim.assert_invariants();
}

#[test]
fn every_step_is_journaled_before_its_first_action() {
    let mut sim = restart_sim();
    sim.refuse_submit = true;
    sim.run(Strategy::Restart, TO);
    // Checked on every effect by the simulator; here the count of distinct starts.
    let starts: Vec<Step> = sim.journal.iter().map(|o| o.step).collect();
    for step in [Step::Stop, Step::TaskManagers, Step::Submit, Step::StopNew] {
        assert!(starts.contains(&step), "{step:?} never journaled");
    }
}

/// The coordinator dies after every effect (before or after its answer is handled) and a
/// new one resumes from the last journal record: the job always ends running, from a
/// snapshot of its own lineage, with no second job running beside it.
#[test]
fn crash_after_any_effect_and_resume_from_the_journal() {
    type Setup = fn(&mut Sim);
    let scenarios: [(&str, Strategy, &str, &str, Setup); 5] = [
        (
            "restart",
            Strategy::Restart,
            "p=2,slots=2,mem=1g,cpu=1,ckpt=5",
            TO,
            |_| {},
        ),
        (
            "rollback",
            Strategy::Restart,
            "p=2,slots=2,mem=1g,cpu=1,ckpt=5",
            TO,
            |s| {
                s.stuck_parallelism = Some(1);
                s.checkpoint_new_jobs = true;
                s.stuck_only_for = Some(2);
            },
        ),
        (
            "in-place",
            Strategy::InPlace,
            "p=1,slots=2,mem=1g,cpu=1,ckpt=5",
            "p=2,slots=2,mem=1g,cpu=1,ckpt=5",
            |_| {},
        ),
        (
            "scale-in",
            Strategy::InPlace,
            "p=4,slots=1,mem=1g,cpu=1,ckpt=5",
            "p=2,slots=1,mem=1g,cpu=1,ckpt=5",
            |_| {},
        ),
        ("initial", Strategy::Initial, "", TO, |_| {}),
    ];
    for (name, strategy, from, to, setup) in scenarios {
        let total = {
            let mut sim = Sim::start_with(from);
            setup(&mut sim);
            sim.run(strategy, to);
            sim.effects_done
        };
        assert!(total > 2, "{name}: {total}");
        for crash_after in 1..total {
            for answer_lost in [false, true] {
                let mut sim = Sim::start_with(from);
                setup(&mut sim);
                sim.crash_after = Some((crash_after, answer_lost));
                let op = sim.run(strategy, to);
                let ctx =
                    format!("{name}, crash after effect {crash_after} (answer lost {answer_lost})");
                assert!(op.is_finished(), "{ctx}");
                if !matches!(op.outcome(), Some(Outcome::NotStarted { .. })) {
                    assert_eq!(sim.running_jobs().len(), 1, "{ctx}: {:#?}", op.log);
                }
                sim.assert_invariants();
            }
        }
    }
}

#[test]
fn unexpected_events_are_ignored() {
    let mut sim = restart_sim();
    let mut m = sim.machine(Strategy::Restart, TO);
    while let Some(e) = m.poll_effect() {
        if !e.is_fire_and_forget() {
            break;
        }
    }
    // An answer that belongs to no effect of this step does not move the machine forward.
    m.handle_event(1, Event::Rescaled(Err(Fault::new("x"))));
    assert_eq!(m.operation().step, Step::Stop);
    m.handle_event(2, Event::TaskManagersEnsured(Ok(())));
    assert_eq!(m.operation().step, Step::Stop);
    assert!(matches!(
        m.poll_effect(),
        None | Some(Effect::TriggerStop { .. })
    ));
}

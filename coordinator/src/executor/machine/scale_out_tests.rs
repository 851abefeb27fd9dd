//! In-place scale-out onto more TaskManagers: new ones start beside the running job, then the
//! adaptive scheduler rescales; a failure moves the job back without ever stopping a
//! TaskManager it may run on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::operation::{Deployment, Outcome};
use super::super::plan::Strategy;
use super::sim::{Sim, cfg};
use crate::flink::JobState;

const FROM: &str = "p=2,slots=2,mem=1g,cpu=1,ckpt=5";
const TO: &str = "p=3,slots=2,mem=1g,cpu=1,ckpt=5";

fn steps(op: &super::super::operation::Operation) -> Vec<String> {
    op.step_durations().into_iter().map(|(s, _)| s).collect()
}

#[test]
fn a_scale_out_starts_the_new_taskmanagers_then_rescales_the_same_job() {
    let mut sim = Sim::running(FROM);
    let op = sim.run(Strategy::InPlace, TO);
    assert_eq!(
        op.outcome(),
        Some(&Outcome::Applied(Deployment {
            config: cfg(TO),
            job_id: sim.first_job.clone(),
            taskmanagers: None,
        }))
    );
    assert_eq!(
        steps(&op),
        [
            "taskmanagers",
            "wait-taskmanagers",
            "rescale",
            "wait-running"
        ]
    );
    assert!(op.savepoint.is_none());
    assert_eq!(sim.jobs.len(), 1);
    assert_eq!(sim.jobs[&sim.first_job].parallelism, 3);
    assert_eq!(sim.tms.len(), 2);
    sim.assert_invariants();
}

#[test]
fn a_new_taskmanager_that_dies_is_stopped_and_the_job_left_alone() {
    let mut sim = Sim::running(FROM);
    sim.dies = vec!["bench-tm1".into()];
    let op = sim.run(Strategy::InPlace, TO);
    let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
        panic!("{:#?}", op.log)
    };
    assert_eq!(deployment.job_id, sim.first_job, "no restart");
    assert_eq!(sim.jobs.len(), 1);
    assert_eq!(sim.jobs[&sim.first_job].state, JobState::Running);
    assert_eq!(sim.jobs[&sim.first_job].parallelism, 2);
    assert_eq!(sim.tms.len(), 1);
    assert!(sim.dead.is_empty(), "the new TaskManager was cleaned up");
    assert!(op.savepoint.is_none() && op.restore_from.is_none());
    sim.assert_invariants();
}

#[test]
fn after_a_failed_rescale_the_job_moves_back_through_a_savepoint() {
    for rescale_fails in [true, false] {
        let mut sim = Sim::running(FROM);
        if rescale_fails {
            sim.fail_rescale_to = Some(3);
        } else {
            sim.stuck_parallelism = Some(2);
            sim.stuck_only_for = Some(3);
        }
        let op = sim.run(Strategy::InPlace, TO);
        let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
            panic!("{:#?}", op.log)
        };
        assert_eq!(deployment.config, cfg(FROM));
        assert_ne!(deployment.job_id, sim.first_job);
        assert_eq!(sim.jobs[&sim.first_job].state, JobState::Finished);
        let new = &sim.jobs[&deployment.job_id];
        assert_eq!(
            new.restored_from.as_deref(),
            sim.jobs[&sim.first_job]
                .snapshots
                .last()
                .map(String::as_str),
            "restored from the savepoint the old job stopped with"
        );
        assert_eq!(
            sim.tms.len(),
            1,
            "the new TaskManager stopped after the job"
        );
        sim.assert_invariants();
    }
}

/// The coordinator dies after any effect of a scale-out (answered or not) and resumes from
/// the journal: one job runs at the end and no TaskManager was stopped under it.
#[test]
fn a_scale_out_survives_a_crash_after_any_effect() {
    for failing in [false, true] {
        let setup = |sim: &mut Sim| {
            if failing {
                sim.fail_rescale_to = Some(3);
            }
        };
        let total = {
            let mut sim = Sim::running(FROM);
            setup(&mut sim);
            sim.run(Strategy::InPlace, TO);
            sim.effects_done
        };
        for crash_after in 1..total {
            for answer_lost in [false, true] {
                let mut sim = Sim::running(FROM);
                setup(&mut sim);
                sim.crash_after = Some((crash_after, answer_lost));
                let op = sim.run(Strategy::InPlace, TO);
                let ctx =
                    format!("failing {failing}, crash after {crash_after}, lost {answer_lost}");
                assert!(op.is_finished(), "{ctx}");
                assert_eq!(sim.running_jobs().len(), 1, "{ctx}: {:#?}", op.log);
                sim.assert_invariants();
            }
        }
    }
}

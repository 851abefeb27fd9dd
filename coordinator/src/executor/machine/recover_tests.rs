//! Recovery of a job that stopped running outside any operation (the watchdog's
//! [`Strategy::Recover`]), against the simulated Flink of `sim.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::operation::{Outcome, Step};
use super::super::plan::Strategy;
use super::sim::{Sim, cfg};
use crate::flink::JobState;

const CURRENT: &str = "p=2,slots=2,mem=1g,cpu=1,ckpt=5";

/// The current job in `state`, with one completed checkpoint.
fn stopped(state: JobState) -> (Sim, String) {
    let mut sim = Sim::running(CURRENT);
    let checkpoint = sim.checkpoint_first_job();
    let first = sim.first_job.clone();
    sim.jobs.get_mut(&first).unwrap().state = state;
    (sim, checkpoint)
}

#[test]
fn a_failed_or_cancelled_job_comes_back_from_its_newest_checkpoint() {
    for state in [JobState::Failed, JobState::Canceled] {
        let (mut sim, checkpoint) = stopped(state);
        let op = sim.run(Strategy::Recover, CURRENT);
        let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
            panic!("{state:?}: {:#?}", op.log)
        };
        assert_eq!(deployment.config, cfg(CURRENT), "{state:?}");
        assert_ne!(deployment.job_id, sim.first_job, "{state:?}: a new job");
        let job = &sim.jobs[&deployment.job_id];
        assert_eq!(job.state, JobState::Running, "{state:?}");
        assert_eq!(job.restored_from.as_deref(), Some(checkpoint.as_str()));
        let steps: Vec<_> = op.step_durations().into_iter().map(|(s, _)| s).collect();
        assert_eq!(
            steps,
            [
                "stop-new",
                "restore-point",
                "taskmanagers",
                "wait-taskmanagers",
                "submit",
                "wait-running"
            ],
            "{state:?}"
        );
        sim.assert_invariants();
    }
}

#[test]
fn a_job_hanging_between_states_is_cancelled_first() {
    let (mut sim, checkpoint) = stopped(JobState::Restarting);
    let op = sim.run(Strategy::Recover, CURRENT);
    let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
        panic!("{:#?}", op.log)
    };
    assert_eq!(sim.jobs[&sim.first_job].state, JobState::Canceled);
    let restored = sim.jobs[&deployment.job_id].restored_from.clone();
    assert_eq!(restored, Some(checkpoint));
    sim.assert_invariants();
}

#[test]
fn a_job_that_runs_again_meanwhile_is_moved_only_through_a_savepoint() {
    let (mut sim, _) = stopped(JobState::Running);
    let op = sim.run(Strategy::Recover, CURRENT);
    let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
        panic!("{:#?}", op.log)
    };
    assert_eq!(sim.jobs[&sim.first_job].state, JobState::Finished);
    let restored = sim.jobs[&deployment.job_id].restored_from.clone().unwrap();
    assert!(restored.starts_with("sp-"), "{restored}");
    sim.assert_invariants();
}

#[test]
fn without_any_snapshot_nothing_is_started_and_someone_is_told() {
    let mut sim = Sim::running(CURRENT);
    let first = sim.first_job.clone();
    sim.jobs.get_mut(&first).unwrap().state = JobState::Failed;
    let op = sim.run(Strategy::Recover, CURRENT);
    assert!(
        matches!(op.outcome(), Some(Outcome::Aborted { .. })),
        "{:#?}",
        op.log
    );
    assert_eq!(sim.jobs.len(), 1, "nothing submitted without state");
    assert_eq!(sim.alerts.len(), 1, "{:?}", sim.alerts);
}

#[test]
fn a_recovery_resumes_after_a_crash_at_any_effect() {
    let total = {
        let (mut sim, _) = stopped(JobState::Failed);
        sim.run(Strategy::Recover, CURRENT);
        sim.effects_done
    };
    for crash_after in 1..total {
        for answer_lost in [false, true] {
            let (mut sim, checkpoint) = stopped(JobState::Failed);
            sim.crash_after = Some((crash_after, answer_lost));
            let op = sim.run(Strategy::Recover, CURRENT);
            let ctx = format!("crash after effect {crash_after} (answer lost {answer_lost})");
            assert_eq!(op.step, Step::Done, "{ctx}");
            let running = sim.running_jobs();
            assert_eq!(running.len(), 1, "{ctx}: {:#?}", op.log);
            let job = &sim.jobs[running[0]];
            assert_eq!(job.restored_from.as_ref(), Some(&checkpoint), "{ctx}");
            sim.assert_invariants();
        }
    }
}

//! In-place scale-in: the adaptive scheduler rescales the running job onto fewer subtasks, then
//! the TaskManagers Flink left without any of them stop. Flink picks where the subtasks stay,
//! so the job keeps whichever TaskManagers it runs on; a TaskManager holding a subtask is never
//! stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::operation::{Operation, Outcome};
use super::super::plan::Strategy;
use super::sim::Sim;
use crate::flink::JobState;

const WIDE: &str = "p=4,slots=1,mem=1g,cpu=1,ckpt=5";
const NARROW: &str = "p=2,slots=1,mem=1g,cpu=1,ckpt=5";

fn steps(op: &Operation) -> Vec<String> {
    op.step_durations().into_iter().map(|(s, _)| s).collect()
}

fn tm_ids(sim: &Sim) -> Vec<String> {
    let mut ids: Vec<String> = sim.tms.iter().map(|t| t.id.clone()).collect();
    ids.sort();
    ids
}

#[test]
fn a_scale_in_stops_only_the_taskmanagers_flink_left_idle() {
    let mut sim = Sim::running(WIDE);
    let op = sim.run(Strategy::InPlace, NARROW);
    let Some(Outcome::Applied(d)) = op.outcome() else {
        panic!("{:#?}", op.log)
    };
    assert_eq!(d.job_id, sim.first_job, "the same job, no restart");
    // The simulated Flink kept the subtasks on tm2 and tm3.
    assert_eq!(d.taskmanagers, Some(vec![2, 3]));
    assert_eq!(d.taskmanager_indices(), [2, 3]);
    assert_eq!(tm_ids(&sim), ["bench-tm2", "bench-tm3"]);
    assert_eq!(steps(&op), ["rescale", "wait-running", "release"]);
    assert!(op.savepoint.is_none());
    assert_eq!(sim.jobs[&sim.first_job].parallelism, 2);
    assert_eq!(sim.jobs[&sim.first_job].state, JobState::Running);
    sim.assert_invariants();
}

#[test]
fn a_scale_out_after_a_scale_in_fills_the_gaps() {
    let mut sim = Sim::running_on(NARROW, &[2, 3]);
    let op = sim.run(Strategy::InPlace, "p=3,slots=1,mem=1g,cpu=1,ckpt=5");
    let Some(Outcome::Applied(d)) = op.outcome() else {
        panic!("{:#?}", op.log)
    };
    assert_eq!(d.taskmanagers, Some(vec![0, 2, 3]));
    assert_eq!(tm_ids(&sim), ["bench-tm0", "bench-tm2", "bench-tm3"]);
    sim.assert_invariants();
    // A restart goes back to `0..n`: the job is stopped first, so any TaskManager may go.
    let mut sim = Sim::running_on(NARROW, &[2, 3]);
    let op = sim.run(Strategy::Restart, "p=2,slots=1,mem=1536m,cpu=1,ckpt=5");
    let Some(Outcome::Applied(d)) = op.outcome() else {
        panic!("{:#?}", op.log)
    };
    assert_eq!(d.taskmanagers, None);
    assert_eq!(tm_ids(&sim), ["bench-tm0", "bench-tm1"]);
    sim.assert_invariants();
}

#[test]
fn a_failed_rescale_goes_back_to_the_old_parallelism_on_every_taskmanager() {
    let mut sim = Sim::running(WIDE);
    sim.fail_rescale_to = Some(2);
    let op = sim.run(Strategy::InPlace, NARROW);
    let Some(Outcome::RolledBack { deployment, .. }) = op.outcome() else {
        panic!("{:#?}", op.log)
    };
    assert_eq!(deployment.job_id, sim.first_job);
    assert_eq!(sim.jobs[&sim.first_job].parallelism, 4);
    assert_eq!(sim.tms.len(), 4, "nothing stopped");
    sim.assert_invariants();
}

#[test]
fn when_the_placement_cannot_be_read_the_change_stands_and_every_taskmanager_runs_on() {
    let mut sim = Sim::running(WIDE);
    sim.placement_fails = true;
    let op = sim.run(Strategy::InPlace, NARROW);
    let Some(Outcome::Applied(d)) = op.outcome() else {
        panic!("{:#?}", op.log)
    };
    assert_eq!(d.taskmanagers, Some(vec![0, 1, 2, 3]), "all may still run");
    assert_eq!(sim.tms.len(), 4);
    assert_eq!(sim.jobs[&sim.first_job].parallelism, 2);
    assert!(
        sim.alerts.iter().any(|a| a.contains("were not stopped")),
        "{:?}",
        sim.alerts
    );
    sim.assert_invariants();
}

//! What a reconfiguration costs in time, step by step, from the ground truth: the schedule the
//! simulated job follows (design §2.4: in place when only the parallelism changes, otherwise a
//! full savepoint restart; a configuration that cannot run is rolled back).

use super::job::SimPhase;
use super::truth::GroundTruth;
use crate::models::space::{JobConfig, SearchSpace};
use crate::policy::ChangeKind;

/// How long a deployment may take to reach RUNNING before the executor rolls it back
/// (design §5): what a configuration that cannot run costs on top of its deployment.
pub const ROLLBACK_DEADLINE_S: f64 = 60.0;

/// One stretch of a change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub duration: f64,
    /// The configuration processing (or being deployed, when not processing).
    pub config: JobConfig,
    pub processing: bool,
    pub phase: SimPhase,
    /// The resources allocated meanwhile (a configuration's TaskManagers).
    pub alloc: JobConfig,
}

/// The steps from `from` to `to`, and whether `to` runs (false: the steps end in a rollback).
pub fn plan(
    truth: &GroundTruth,
    space: &SearchSpace,
    kind: ChangeKind,
    from: JobConfig,
    to: JobConfig,
) -> (bool, Vec<Step>) {
    let runs = space.is_valid(&to) && truth.can_run(&to);
    let step = |duration: f64, config: JobConfig, alloc: JobConfig| Step {
        duration,
        config,
        processing: false,
        phase: SimPhase::Reconfiguring,
        alloc,
    };
    let mut steps = Vec::new();
    match kind {
        ChangeKind::InPlace => {
            // The extra TaskManagers of a scale-up start first while the job keeps running;
            // after a scale-in the idle ones stop once the job runs at the new parallelism
            // (this twin assumes Flink leaves whole TaskManagers idle, as it does with one
            // slot each; the executor keeps any that still hold a subtask).
            let more = if to.task_managers() > from.task_managers() {
                steps.push(Step {
                    duration: truth.tm_start_s,
                    config: from,
                    processing: true,
                    phase: SimPhase::Preparing,
                    alloc: to,
                });
                to
            } else {
                from
            };
            if runs {
                steps.push(step(truth.in_place_downtime_s(&to), to, more));
            } else {
                steps.push(step(truth.rescale_base_s + ROLLBACK_DEADLINE_S, to, more));
                steps.push(step(truth.in_place_downtime_s(&from), from, more));
            }
        }
        ChangeKind::FullRestart => {
            steps.push(step(truth.savepoint_s(&from), from, from));
            if runs {
                let start = truth.taskmanager_start_s(&from, &to);
                steps.push(step(start + truth.restart_s(&to), to, to));
            } else {
                steps.push(step(truth.tm_start_s + ROLLBACK_DEADLINE_S, to, to));
                steps.push(step(truth.tm_start_s + truth.restart_s(&from), from, from));
            }
        }
    }
    (runs, steps)
}

/// Total downtime of a successful change from `from` to `to` (what a policy that knows the
/// truth prices in).
pub fn downtime_s(truth: &GroundTruth, space: &SearchSpace, from: JobConfig, to: JobConfig) -> f64 {
    let (_, steps) = plan(truth, space, ChangeKind::between(&from, &to), from, to);
    steps
        .iter()
        .filter(|s| !s.processing)
        .map(|s| s.duration)
        .sum()
}

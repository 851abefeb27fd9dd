//! How the machine reacts to each effect's answer.

use super::super::effects::{
    Effect, Event, Fault, JobView, SavepointProgress, StopView, TaskManagersView,
};
use super::super::operation::{Deployment, Outcome, Phase, Step};
use super::super::plan::{Strategy, kept_after_scale_in, taskmanager_id};
use super::super::taskmanagers::prefix;
use super::{Machine, Sub};
use crate::flink::JobState;

/// Stops re-triggered after a declined savepoint before the operation gives up (aborted, the
/// old job running on).
const MAX_STOP_RETRIES: u32 = 2;

impl Machine {
    /// The answer to the effect the machine is waiting for.
    pub fn handle_event(&mut self, now: u64, event: Event) {
        if !self.awaiting || self.op.is_finished() {
            tracing::warn!(?event, "executor: unexpected event ignored");
            return;
        }
        self.awaiting = false;
        let step = self.op.step;
        match (step, event) {
            (Step::Stop | Step::StopNew, Event::StopTriggered(Ok(trigger))) => {
                self.op
                    .note(now, format!("{}: savepoint trigger {trigger}", step.name()));
                self.op.trigger = Some(trigger);
                self.journal(None);
                self.act();
            }
            (Step::Stop, Event::StopTriggered(Err(f))) => {
                self.op
                    .note(now, format!("stop: no clear answer ({})", f.message));
                self.enter(now, Step::ResolveStop, None);
            }
            (Step::StopNew, Event::StopTriggered(Err(f))) => {
                self.op.note(now, format!("stop-new: {}", f.message));
                self.enter(now, Step::CancelNew, None);
            }
            (Step::Stop | Step::StopNew, Event::Savepoint(result)) => {
                self.on_savepoint(now, step, result)
            }
            (Step::ResolveStop, Event::StopInspected(Ok(view))) => self.on_stop_view(now, view),
            (Step::TaskManagers, Event::TaskManagersEnsured(Ok(()))) => {
                self.enter(now, Step::WaitTaskManagers, Some(step))
            }
            (Step::TaskManagers, Event::TaskManagersEnsured(Err(f))) => self.fail(now, f.message),
            (Step::WaitTaskManagers, Event::TaskManagers(Ok(view))) => {
                self.on_taskmanagers(now, &view)
            }
            (Step::Submit, Event::Submitted(Ok(()))) => {
                self.enter(now, Step::WaitRunning, Some(step))
            }
            (Step::Submit, Event::Submitted(Err(f))) => {
                // The answer may have been lost after Flink accepted the job: look for it by
                // its fixed id before calling the submission failed.
                self.op
                    .note(now, format!("submit: {}; looking for the job", f.message));
                self.sub = Sub::SubmitCheck {
                    until: Some(now + self.limits.submit_confirm_ms),
                };
                self.act();
            }
            (Step::Submit, Event::Job(Ok(found))) => self.on_submit_check(now, found.is_some()),
            (Step::WaitRunning, Event::Job(Ok(view))) => self.on_running(now, view),
            (Step::Rescale, Event::Rescaled(Ok(()))) => {
                self.enter(now, Step::WaitRunning, Some(step))
            }
            (Step::Rescale, Event::Rescaled(Err(f))) => self.fail(now, f.message),
            (Step::Release, Event::Placement(Ok(busy))) => self.on_placement(now, &busy),
            (Step::Release, Event::TaskManagersEnsured(Ok(()))) => self.succeed(now),
            (Step::Release, Event::TaskManagersEnsured(Err(f))) => self.fail(now, f.message),
            (Step::StopNew, Event::Job(Ok(view))) => match view {
                Some(v) if v.state == JobState::Running => {
                    let job = self.submitted();
                    self.request(Effect::TriggerStop { job });
                }
                Some(v) if !v.state.is_terminal() => self.enter(now, Step::CancelNew, Some(step)),
                _ => self.enter(now, Step::RestorePoint, Some(step)),
            },
            (Step::CancelNew, Event::Cancelled(_)) => {
                // Whatever the answer, the job's state tells whether it is gone.
                self.sub = Sub::CancelSent;
                self.act();
            }
            (Step::CancelNew, Event::Job(Ok(view))) => match view {
                Some(v) if !v.state.is_terminal() => self.later(now),
                _ => self.enter(now, Step::RestorePoint, Some(step)),
            },
            (Step::RestorePoint, Event::RestorePoint(Ok(point))) => {
                self.on_restore_point(now, point)
            }
            // Transient failures of reads: try again at the next poll, until the deadline.
            (_, Event::StopInspected(Err(f)))
            | (_, Event::TaskManagers(Err(f)))
            | (_, Event::Placement(Err(f)))
            | (_, Event::Job(Err(f)))
            | (_, Event::RestorePoint(Err(f))) => {
                tracing::debug!(step = step.name(), error = %f.message, "executor: read failed");
                self.later(now)
            }
            (step, event) => {
                tracing::warn!(
                    step = step.name(),
                    ?event,
                    "executor: event does not fit the step"
                );
                self.later(now)
            }
        }
    }

    fn on_savepoint(&mut self, now: u64, step: Step, result: Result<SavepointProgress, Fault>) {
        match result {
            Ok(SavepointProgress::Completed { location }) => {
                self.op.trigger = None;
                self.op
                    .note(now, format!("{}: savepoint {location}", step.name()));
                if step == Step::Stop {
                    self.op.savepoint = Some(location);
                } else {
                    self.op.restore_from = Some(location);
                }
                self.enter(now, Step::TaskManagers, Some(step));
            }
            Ok(SavepointProgress::Failed { message }) => {
                self.op.trigger = None;
                self.op
                    .note(now, format!("{}: savepoint failed: {message}", step.name()));
                let next = if step == Step::Stop {
                    Step::ResolveStop
                } else {
                    Step::CancelNew
                };
                self.enter(now, next, None);
            }
            Ok(SavepointProgress::InProgress) => self.later(now),
            Err(f) => {
                tracing::debug!(error = %f.message, "executor: savepoint poll failed");
                self.later(now)
            }
        }
    }

    fn on_stop_view(&mut self, now: u64, view: StopView) {
        match (view.state, view.savepoint) {
            (Some(JobState::Finished), Some(location)) => {
                self.op.note(
                    now,
                    format!("resolve-stop: stopped with savepoint {location}"),
                );
                self.op.savepoint = Some(location);
                self.op.trigger = None;
                self.enter(now, Step::TaskManagers, Some(Step::ResolveStop));
            }
            (Some(JobState::Failed | JobState::Canceled), _) => {
                self.start_rollback(now, "the old job ended without our savepoint".into(), 1)
            }
            (None, _) => {
                self.alert(
                    now,
                    format!(
                        "job {}: Flink no longer knows job {}; nothing to restore from",
                        self.op.job,
                        self.old_job()
                    ),
                );
                self.finish(
                    now,
                    Outcome::Aborted {
                        reason: "old job unknown to Flink".into(),
                    },
                    None,
                );
            }
            // FINISHED without a visible savepoint yet: Flink caches checkpoint statistics for
            // a few seconds; look again.
            (Some(JobState::Finished), None) => self.later(now),
            (Some(_), _) if view.snapshot_in_progress => {
                self.sub = Sub::Quiet(None);
                self.later(now)
            }
            (Some(_), _) => {
                let since = match self.sub {
                    Sub::Quiet(Some(since)) => since,
                    _ => now,
                };
                self.sub = Sub::Quiet(Some(since));
                if now.saturating_sub(since) >= self.limits.resolve_quiet_ms
                    && self.stop_retries < MAX_STOP_RETRIES
                {
                    // Flink declines a savepoint while a task is not running yet (right after
                    // a rescale, "Checkpoint triggering task … is not being executed"): the job
                    // runs on unchanged, so asking again after the quiet wait is safe.
                    self.stop_retries += 1;
                    self.op.note(
                        now,
                        format!(
                            "resolve-stop: the job runs on; stop again (retry {} of {MAX_STOP_RETRIES})",
                            self.stop_retries
                        ),
                    );
                    self.sub = Sub::None;
                    self.enter(now, Step::Stop, Some(Step::ResolveStop));
                } else if now.saturating_sub(since) >= self.limits.resolve_quiet_ms {
                    let reason = "the stop did not happen; the job runs on unchanged".to_string();
                    self.finish(now, Outcome::Aborted { reason }, Some(Step::ResolveStop));
                } else {
                    self.later(now)
                }
            }
        }
    }

    fn on_taskmanagers(&mut self, now: u64, view: &TaskManagersView) {
        let specs = self.target_specs();
        if let Some(dead) = specs.iter().find(|s| view.dead.contains(&s.id)) {
            return self.fail(now, format!("TaskManager {} exited (see its log)", dead.id));
        }
        let ours = prefix(&self.op.job);
        let mut registered: Vec<_> = view
            .registered
            .iter()
            .filter(|t| t.id.starts_with(&ours))
            .map(|t| (t.id.clone(), t.slots, t.memory_mb))
            .collect();
        registered.sort();
        let mut wanted: Vec<_> = specs
            .iter()
            .map(|s| (s.id.clone(), s.slots, s.process_memory_mb))
            .collect();
        wanted.sort();
        if registered == wanted {
            let next = self.after_taskmanagers();
            self.enter(now, next, Some(Step::WaitTaskManagers));
        } else {
            self.later(now);
        }
    }

    /// Where the target's TaskManagers registering leads: a submission from the restore point,
    /// except in an in-place scale-out, where the job runs on: forward it rescales onto the new
    /// TaskManagers; rolled back before any rescale, the new ones are gone again and the job
    /// only has to be seen running as before.
    fn after_taskmanagers(&self) -> Step {
        if self.op.strategy != Strategy::InPlace {
            return Step::Submit;
        }
        match self.op.phase {
            Phase::Forward => Step::Rescale,
            _ if self.op.restore_from.is_none() => Step::WaitRunning,
            _ => Step::Submit,
        }
    }

    fn on_submit_check(&mut self, now: u64, found: bool) {
        match (found, &self.sub) {
            (true, _) => self.enter(now, Step::WaitRunning, Some(Step::Submit)),
            (false, Sub::SubmitCheck { until: None }) => {
                self.sub = Sub::None;
                self.act();
            }
            (false, Sub::SubmitCheck { until: Some(until) }) if now < *until => self.later(now),
            (false, _) => self.fail(now, "the submission was not accepted".into()),
        }
    }

    fn on_running(&mut self, now: u64, view: Option<JobView>) {
        let Some(view) = view else {
            return self.later(now);
        };
        if view.state.is_terminal() {
            return self.fail(now, format!("the job ended {:?}", view.state));
        }
        let p = self.op.target().parallelism;
        let at_target = view.state == JobState::Running
            && view.all_running
            && view
                .vertices
                .iter()
                .all(|(got, max)| *got == max.map_or(p, |m| p.min(m)));
        if !at_target {
            self.sub = Sub::Baseline(None);
            return self.later(now);
        }
        let records = view.source_records.unwrap_or(0.0);
        match self.sub {
            _ if !self.limits.require_records => self.running_at_target(now),
            Sub::Baseline(Some(base)) if records > base => self.running_at_target(now),
            Sub::Baseline(Some(_)) => self.later(now),
            _ => {
                self.sub = Sub::Baseline(Some(records));
                self.later(now)
            }
        }
    }

    /// The job runs at the target: done, unless a scale-in has TaskManagers to release.
    fn running_at_target(&mut self, now: u64) {
        if self.op.phase == Phase::Forward && self.releases_taskmanagers() {
            self.enter(now, Step::Release, Some(Step::WaitRunning));
        } else {
            self.succeed(now);
        }
    }

    /// Where Flink placed the job's subtasks after a scale-in: keep those TaskManagers (and
    /// idle ones up to the target's count), journal the choice, then stop the others.
    fn on_placement(&mut self, now: u64, busy: &[String]) {
        let from = self
            .op
            .from
            .as_ref()
            .map(Deployment::taskmanager_indices)
            .unwrap_or_default();
        let job = &self.op.job;
        if !from.iter().any(|&i| busy.contains(&taskmanager_id(job, i))) {
            // A running job has subtasks on its TaskManagers: an answer naming none of them is
            // not evidence that every one is idle.
            return self.later(now);
        }
        let kept = kept_after_scale_in(job, &from, busy, self.op.to.task_managers());
        if kept == from {
            self.op.note(
                now,
                format!("release: subtasks on {busy:?}; no TaskManager is idle"),
            );
            self.op.kept = Some(kept);
            return self.succeed(now);
        }
        let stopping: Vec<u32> = from.iter().copied().filter(|i| !kept.contains(i)).collect();
        self.op.note(
            now,
            format!("release: subtasks on {busy:?}; stopping tm{stopping:?}, keeping tm{kept:?}"),
        );
        self.op.kept = Some(kept);
        self.journal(None);
        self.act();
    }

    fn on_restore_point(&mut self, now: u64, point: Option<String>) {
        if let Some(p) = &point {
            self.op.note(now, format!("restore-point: {p}"));
        }
        self.op.restore_from = point
            .or(self.op.restore_from.take())
            .or(self.op.savepoint.clone());
        if self.op.strategy == Strategy::Initial {
            let reason = self.rollback_reason();
            return self.finish(
                now,
                Outcome::NotStarted { reason },
                Some(Step::RestorePoint),
            );
        }
        if self.op.restore_from.is_none() {
            self.alert(
                now,
                format!(
                    "job {}: no snapshot to restore the old configuration from",
                    self.op.job
                ),
            );
            let reason = "no restore point".to_string();
            return self.finish(now, Outcome::Aborted { reason }, Some(Step::RestorePoint));
        }
        self.enter(now, Step::TaskManagers, Some(Step::RestorePoint));
    }
}

//! Entering steps, failing them, rolling back and finishing.

use super::super::effects::Effect;
use super::super::operation::{Deployment, Outcome, Phase, Step};
use super::super::plan::{Strategy, taskmanager_specs_at};
use super::{Machine, Sub};
use crate::flink::JobId;

impl Machine {
    /// Journals the step as started (closing `finished`) and sets its deadline.
    pub(super) fn begin(&mut self, now: u64, step: Step, finished: Option<Step>) {
        if let Some(done) = finished {
            let took = now.saturating_sub(self.op.step_started_ms);
            self.op
                .note(now, format!("{} done in {took} ms", done.name()));
        }
        if step == Step::Submit {
            // Each attempt submits under its own fixed id; a resumed attempt reuses it.
            let attempt = match self.op.phase {
                Phase::RollingBack { attempt, .. } => attempt,
                _ => 0,
            };
            self.op.submitted = Some(self.op.job_id_for(attempt));
        }
        self.op.step = step;
        self.op.step_started_ms = now;
        self.deadline = now.saturating_add(self.limits.of(step));
        self.sub = Sub::None;
        self.wake_at = None;
        self.journal(finished);
    }

    /// [`Self::begin`], then the step's first action.
    pub(super) fn enter(&mut self, now: u64, step: Step, finished: Option<Step>) {
        self.begin(now, step, finished);
        self.act();
    }

    pub(super) fn journal(&mut self, finished: Option<Step>) {
        self.queue.push_back(Effect::Journal {
            op: Box::new(self.op.clone()),
            finished,
        });
    }

    pub(super) fn alert(&mut self, now: u64, message: String) {
        self.op.note(now, format!("ALERT: {message}"));
        self.queue.push_back(Effect::Alert { message });
    }

    pub(super) fn request(&mut self, effect: Effect) {
        self.awaiting = true;
        self.queue.push_back(effect);
    }

    pub(super) fn submitted(&self) -> JobId {
        self.op
            .submitted
            .clone()
            .unwrap_or_else(|| self.op.job_id_for(0))
    }

    pub(super) fn old_job(&self) -> JobId {
        self.op
            .from
            .as_ref()
            .map(|d| d.job_id.clone())
            .unwrap_or_else(|| self.submitted())
    }

    /// The current step's action (again, after a poll interval).
    pub(super) fn act(&mut self) {
        let op = &self.op;
        let effect = match op.step {
            Step::Stop => match &op.trigger {
                Some(trigger) => Effect::PollSavepoint {
                    job: self.old_job(),
                    trigger: trigger.clone(),
                },
                None => Effect::TriggerStop {
                    job: self.old_job(),
                },
            },
            Step::ResolveStop => Effect::InspectStop {
                job: self.old_job(),
                since_ms: op.started_ms,
            },
            Step::TaskManagers => Effect::EnsureTaskManagers {
                job: op.job.clone(),
                specs: self.target_specs(),
            },
            Step::WaitTaskManagers => Effect::QueryTaskManagers {
                job: op.job.clone(),
                ids: self.target_specs().into_iter().map(|s| s.id).collect(),
            },
            Step::Submit => match self.sub {
                Sub::SubmitCheck { .. } => Effect::QueryJob {
                    job: self.submitted(),
                },
                _ => Effect::Submit {
                    job_id: self.submitted(),
                    config: op.target(),
                    restore: match op.phase {
                        Phase::RollingBack { .. } => op.restore_from.clone(),
                        _ => op.savepoint.clone(),
                    },
                },
            },
            Step::WaitRunning => Effect::QueryJob {
                job: self.submitted(),
            },
            Step::Rescale => Effect::Rescale {
                job: self.submitted(),
                parallelism: op.target().parallelism,
            },
            // Where the subtasks run first; once the kept ones are journaled, the others stop.
            Step::Release => match op.kept {
                None => Effect::QueryPlacement {
                    job: self.submitted(),
                },
                Some(_) => Effect::EnsureTaskManagers {
                    job: op.job.clone(),
                    specs: self.target_specs(),
                },
            },
            Step::StopNew => match &op.trigger {
                Some(trigger) => Effect::PollSavepoint {
                    job: self.submitted(),
                    trigger: trigger.clone(),
                },
                None => Effect::QueryJob {
                    job: self.submitted(),
                },
            },
            Step::CancelNew => match self.sub {
                Sub::CancelSent => Effect::QueryJob {
                    job: self.submitted(),
                },
                _ => Effect::Cancel {
                    job: self.submitted(),
                },
            },
            Step::RestorePoint => Effect::ReadRestorePoint {
                job: op.submitted.clone().unwrap_or_else(|| self.old_job()),
            },
            Step::Done => return,
        };
        self.request(effect);
    }

    /// The TaskManagers of [`Self::target_indices`], sized for the phase's configuration.
    pub(super) fn target_specs(&self) -> Vec<demeter_common::protocol::TaskManagerSpec> {
        taskmanager_specs_at(
            &self.op.job,
            &self.cluster,
            &self.op.target(),
            &self.target_indices(),
        )
    }

    /// Not there yet: poll again, unless the step's deadline has passed.
    pub(super) fn later(&mut self, now: u64) {
        if now >= self.deadline {
            self.on_deadline(now);
        } else {
            self.wake_at = Some(now.saturating_add(self.limits.poll_ms).min(self.deadline));
        }
    }

    pub(super) fn on_deadline(&mut self, now: u64) {
        let step = self.op.step;
        let secs = self.limits.of(step) / 1000;
        match step {
            // The old job is either running or stopping: keep watching, but tell someone.
            Step::ResolveStop => {
                self.alert(
                    now,
                    format!(
                        "job {}: stop of {} unresolved after {secs} s; still watching",
                        self.op.job,
                        self.old_job()
                    ),
                );
                self.deadline = now.saturating_add(self.limits.resolve_ms);
                self.act();
            }
            // A new job that cannot take its savepoint in time is cancelled instead.
            Step::StopNew => self.enter(now, Step::CancelNew, None),
            _ => self.fail(now, format!("{} not done within {secs} s", step.name())),
        }
    }

    /// The current step failed: resolve an unclear stop, start a rollback, or retry one.
    pub(super) fn fail(&mut self, now: u64, reason: String) {
        let step = self.op.step;
        self.op
            .note(now, format!("{} failed: {reason}", step.name()));
        tracing::warn!(job = %self.op.job, step = step.name(), %reason, "executor: step failed");
        match self.op.phase.clone() {
            // The job runs at its new parallelism: the change stands. The TaskManagers it no
            // longer needs may still run, so the deployment keeps listing all of them.
            Phase::Forward if step == Step::Release => {
                self.alert(
                    now,
                    format!(
                        "job {}: the TaskManagers the scale-in freed were not stopped ({reason}); \
                         they keep running until the next change",
                        self.op.job
                    ),
                );
                self.op.kept = self.op.from.as_ref().map(Deployment::taskmanager_indices);
                self.succeed(now);
            }
            Phase::Forward => match self.op.strategy {
                Strategy::Restart if self.op.savepoint.is_none() => {
                    // Failing before our savepoint completed: the old job may still run or be
                    // stopping. Find out; never restart anything without the savepoint.
                    self.enter(now, Step::ResolveStop, None)
                }
                _ => self.start_rollback(now, format!("{}: {reason}", step.name()), 1),
            },
            Phase::RollingBack {
                reason: first,
                attempt,
                ..
            } => {
                let wait = self.limits.backoff(attempt);
                self.alert(now, format!(
                    "job {}: rollback attempt {attempt} failed at {}: {reason}; retrying in {} s",
                    self.op.job,
                    step.name(),
                    wait / 1000
                ));
                self.op.phase = Phase::RollingBack {
                    reason: first,
                    attempt,
                    retry_at_ms: Some(now.saturating_add(wait)),
                };
                self.journal(None);
                self.wake_at = Some(now.saturating_add(wait));
            }
            Phase::Finished(_) => {}
        }
    }

    pub(super) fn start_rollback(&mut self, now: u64, reason: String, attempt: u32) {
        // A scale-out that failed before it asked Flink to rescale left the job untouched on
        // its old TaskManagers: stopping the new ones is enough. Once the rescale may have
        // happened the job may run on the new ones too, and only a savepoint moves it back.
        let rescale_never_sent = attempt == 1
            && self.op.phase == Phase::Forward
            && matches!(self.op.step, Step::TaskManagers | Step::WaitTaskManagers);
        self.op
            .note(now, format!("rollback attempt {attempt}: {reason}"));
        self.op.phase = Phase::RollingBack {
            reason,
            attempt,
            retry_at_ms: None,
        };
        self.op.trigger = None;
        let first = match self.op.strategy {
            Strategy::InPlace if self.adds_taskmanagers() && rescale_never_sent => {
                Step::TaskManagers
            }
            Strategy::InPlace if self.adds_taskmanagers() => Step::StopNew,
            Strategy::InPlace => Step::Rescale,
            Strategy::Initial if self.op.submitted.is_some() => Step::CancelNew,
            Strategy::Initial => {
                let reason = self.rollback_reason();
                return self.finish(now, Outcome::NotStarted { reason }, None);
            }
            Strategy::Restart | Strategy::Recover if self.op.submitted.is_some() => Step::StopNew,
            Strategy::Restart if self.op.savepoint.is_some() || self.op.restore_from.is_some() => {
                if self.op.restore_from.is_none() {
                    self.op.restore_from = self.op.savepoint.clone();
                }
                Step::TaskManagers
            }
            Strategy::Restart | Strategy::Recover => Step::RestorePoint,
        };
        self.enter(now, first, None);
    }

    pub(super) fn rollback_reason(&self) -> String {
        match &self.op.phase {
            Phase::RollingBack { reason, .. } => reason.clone(),
            _ => "failed".into(),
        }
    }

    pub(super) fn succeed(&mut self, now: u64) {
        let config = self.op.target();
        let indices = self.target_indices();
        let contiguous = indices.iter().copied().eq(0..config.task_managers());
        let deployment = Deployment {
            config,
            job_id: self.submitted(),
            taskmanagers: (!contiguous).then_some(indices),
        };
        let outcome = match self.op.phase {
            Phase::RollingBack { .. } => Outcome::RolledBack {
                deployment,
                reason: self.rollback_reason(),
            },
            _ => Outcome::Applied(deployment),
        };
        self.finish(now, outcome, Some(self.op.step));
    }

    pub(super) fn finish(&mut self, now: u64, outcome: Outcome, finished: Option<Step>) {
        if let Some(done) = finished {
            let took = now.saturating_sub(self.op.step_started_ms);
            self.op
                .note(now, format!("{} done in {took} ms", done.name()));
        }
        let total = now.saturating_sub(self.op.started_ms);
        self.op
            .note(now, format!("finished in {total} ms: {outcome:?}"));
        self.op.phase = Phase::Finished(outcome);
        self.op.step = Step::Done;
        self.op.step_started_ms = now;
        self.awaiting = false;
        self.wake_at = None;
        self.journal(finished);
    }
}

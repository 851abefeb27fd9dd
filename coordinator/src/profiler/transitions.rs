//! The copy machine's transitions: events and timeouts in, phase changes and effects queued.

use super::{CopyMachine, CopyOutcome, Effect, Event, Phase, RecoveryTimes};
use crate::executor::failure::RecoveryWatch;

impl CopyMachine {
    /// The answer to `answered`, the effect [`CopyMachine::poll_effect`] handed out. An answer
    /// to an effect the machine no longer waits for (it tore down meanwhile) is ignored.
    pub fn handle_event(&mut self, now: u64, answered: &Effect, event: Event) {
        if self.pending.as_ref() != Some(answered) {
            tracing::debug!(copy = %self.name, ?answered, ?event, "stale answer ignored");
            return;
        }
        let Some(pending) = self.pending.take() else {
            return;
        };
        match &event {
            Event::Failed { message } => return self.failed(now, &pending, message),
            Event::Exited { what } => return self.fail(now, what),
            _ => {}
        }
        match (self.phase, pending, event) {
            (Phase::Provisioning, Effect::Provision, Event::Provisioned) => {
                self.enter(now, Phase::Registering)
            }
            (
                Phase::Registering,
                Effect::CheckCluster,
                Event::Cluster {
                    taskmanagers,
                    slots,
                },
            ) => {
                if taskmanagers >= self.taskmanagers && slots >= self.config.parallelism {
                    self.enter(now, Phase::Submitting);
                } else {
                    self.sample_later(now);
                }
            }
            (Phase::Submitting, Effect::Submit, Event::Submitted) => {
                self.enter(now, Phase::Starting)
            }
            (_, Effect::Sample, Event::Sample(sample)) => self.on_sample(now, *sample),
            (Phase::Killing, Effect::Kill { .. }, Event::Killed { at_ms }) => {
                let last = self.last_sample.clone().unwrap_or_default();
                self.watch = Some(RecoveryWatch::new(
                    &self.victim,
                    at_ms,
                    last.parallelism,
                    last.restarts,
                    self.times.drained_polls,
                ));
                self.enter(now, Phase::Recovering);
            }
            (Phase::TearingDown, Effect::TearDown { .. }, Event::TornDown) => {
                self.enter(now, Phase::Done)
            }
            (phase, effect, event) => {
                tracing::warn!(copy = %self.name, ?phase, ?effect, ?event, "unexpected answer ignored");
            }
        }
    }

    /// A time from [`CopyMachine::poll_timeout`] came.
    pub fn handle_timeout(&mut self, now: u64) {
        if let Some(deadline) = self.deadline
            && now >= deadline
        {
            self.deadline_passed(now);
            return;
        }
        if self.phase == Phase::AwaitingCheckpoint
            && self.kill_at.is_some_and(|at| now >= at)
            && self.pending.is_none()
        {
            self.enter(now, Phase::Killing);
            return;
        }
        if self.next_sample.is_some_and(|at| now >= at) && self.pending.is_none() {
            self.next_sample = None;
            self.queued = Some(if self.phase == Phase::Registering {
                Effect::CheckCluster
            } else {
                Effect::Sample
            });
        }
    }

    fn on_sample(&mut self, now: u64, s: super::CopySample) {
        match self.phase {
            Phase::Starting if self.planned_shape(&s) => {
                self.running_at = Some(now);
                self.enter(now, Phase::WarmingUp);
            }
            Phase::WarmingUp => {
                if !self.planned_shape(&s) {
                    // A restart during warm-up: warm up again from the next RUNNING.
                    self.enter(now, Phase::Starting);
                } else if now >= self.phase_since + self.times.warmup_ms {
                    self.enter(now, Phase::Measuring);
                    self.window.push((now, s.clone()));
                }
            }
            Phase::Measuring => {
                if !self.planned_shape(&s)
                    || s.restarts > self.window.first().map_or(0.0, |w| w.1.restarts)
                {
                    self.window.clear();
                    self.enter(now, Phase::Starting);
                } else {
                    self.window.push((now, s.clone()));
                    if now >= self.phase_since + self.times.measure_ms {
                        self.measurement_done();
                        if self.measured.is_none() {
                            self.fail(
                                now,
                                "no measurement: the latency metric never reported a value",
                            );
                        } else {
                            self.enter(now, Phase::AwaitingCheckpoint);
                            self.schedule_kill(now, &s);
                        }
                    }
                }
            }
            Phase::AwaitingCheckpoint => self.schedule_kill(now, &s),
            Phase::Recovering => {
                let point = self.recovery_point(now, &s);
                if let Some(r) = self.watch.as_mut().and_then(|w| w.observe(&point)) {
                    self.recovery = Some(RecoveryTimes {
                        running_ms: r.running_ms,
                        flowing_ms: r.flowing_ms,
                        drained_ms: r.drained_ms,
                        censored: false,
                        before_checkpoint_ms: self.before_checkpoint(),
                    });
                    self.finish_measured(now);
                    return;
                }
            }
            _ => {}
        }
        if !matches!(
            self.phase,
            Phase::TearingDown | Phase::Done | Phase::Killing
        ) {
            self.last_sample = Some(s);
            self.sample_later(now);
        } else {
            self.last_sample = Some(s);
        }
    }

    fn before_checkpoint(&self) -> Option<u64> {
        self.kill_at.map(|_| self.times.kill_margin_ms)
    }

    /// Measured (and recovery timed or censored): the outcome, then tear down.
    fn finish_measured(&mut self, now: u64) {
        if let Some(mut o) = self.measured {
            o.recovery_s = self
                .recovery
                .as_ref()
                .map(|r| (r.drained_ms as f64 / 1000.0).max(0.001));
            self.outcome = Some(CopyOutcome::Measured(o));
        }
        self.enter(now, Phase::TearingDown);
    }

    fn deadline_passed(&mut self, now: u64) {
        match self.phase {
            Phase::AwaitingCheckpoint => {
                // No checkpoint to time the kill by: kill now rather than not at all.
                tracing::warn!(copy = %self.name, "no completed checkpoint seen; killing without timing");
                self.kill_at = None;
                self.enter(now, Phase::Killing);
            }
            Phase::Recovering => {
                let cap = self.times.max_recovery_ms;
                let w = self.watch.as_ref();
                self.recovery = Some(RecoveryTimes {
                    running_ms: cap,
                    flowing_ms: cap,
                    drained_ms: cap,
                    censored: true,
                    before_checkpoint_ms: self.before_checkpoint(),
                });
                tracing::warn!(copy = %self.name, cap_ms = cap, watching = w.is_some(),
                    "not recovered within the cap; reporting the cap");
                self.finish_measured(now);
            }
            Phase::TearingDown => {
                self.teardown_error = Some(format!(
                    "tear-down not confirmed within {} s",
                    self.times.teardown_deadline_ms / 1000
                ));
                self.pending = None;
                self.enter(now, Phase::Done);
            }
            Phase::Done => {}
            phase => {
                let secs = (now.saturating_sub(self.phase_since)) / 1000;
                self.fail(now, &format!("deadline passed in {phase:?} after {secs} s"));
            }
        }
    }

    fn failed(&mut self, now: u64, effect: &Effect, message: &str) {
        match (self.phase, effect) {
            (Phase::TearingDown, Effect::TearDown { .. }) => {
                self.teardown_error = Some(message.to_string());
                self.enter(now, Phase::Done);
            }
            // A reading that failed is retried at the next sample time (the phase deadline
            // bounds how long); a failed kill still leaves a valid measurement.
            (_, Effect::Sample | Effect::CheckCluster) => self.sample_later(now),
            (Phase::Killing, Effect::Kill { .. }) => {
                tracing::warn!(copy = %self.name, message, "kill failed; reporting without recovery");
                self.finish_measured(now);
            }
            _ => self.fail(now, message),
        }
    }

    /// Ends the copy as failed (keeping a measurement already taken) and tears it down.
    fn fail(&mut self, now: u64, message: &str) {
        if matches!(self.phase, Phase::TearingDown | Phase::Done) {
            return;
        }
        tracing::warn!(copy = %self.name, phase = ?self.phase, message, "profiling copy failed");
        self.outcome = Some(match self.measured {
            Some(o) => CopyOutcome::Measured(o),
            None => CopyOutcome::Failed(format!("{:?}: {message}", self.phase)),
        });
        self.enter(now, Phase::TearingDown);
    }

    fn sample_later(&mut self, now: u64) {
        self.next_sample = Some(now + self.times.sample_every_ms);
    }

    pub(super) fn enter(&mut self, now: u64, phase: Phase) {
        tracing::info!(copy = %self.name, from = ?self.phase, to = ?phase, "profiling copy phase");
        self.phase = phase;
        self.phase_since = now;
        self.next_sample = None;
        let t = &self.times;
        let (deadline, effect) = match phase {
            Phase::Provisioning => (Some(t.start_deadline_ms), Some(Effect::Provision)),
            Phase::Registering => {
                let left = (self.started + t.start_deadline_ms).saturating_sub(now);
                self.next_sample = Some(now);
                (Some(left), None)
            }
            Phase::Submitting => (Some(t.running_deadline_ms), Some(Effect::Submit)),
            Phase::Starting => {
                self.next_sample = Some(now + t.sample_every_ms);
                (Some(t.running_deadline_ms), None)
            }
            Phase::WarmingUp => {
                self.next_sample = Some(now + t.sample_every_ms);
                (Some(t.warmup_ms + t.running_deadline_ms), None)
            }
            Phase::Measuring => {
                self.next_sample = Some(now + t.sample_every_ms);
                (Some(t.measure_ms + t.running_deadline_ms), None)
            }
            Phase::AwaitingCheckpoint => {
                self.next_sample = Some(now);
                (Some(t.checkpoint_wait_ms), None)
            }
            Phase::Killing => (
                Some(t.running_deadline_ms),
                Some(Effect::Kill {
                    victim: self.victim.clone(),
                }),
            ),
            Phase::Recovering => {
                self.next_sample = Some(now + t.sample_every_ms / 2);
                (Some(t.max_recovery_ms), None)
            }
            Phase::TearingDown => (
                Some(t.teardown_deadline_ms),
                Some(Effect::TearDown {
                    keep_logs: self.has_failed(),
                }),
            ),
            Phase::Done => {
                self.finished = Some(now);
                (None, None)
            }
        };
        self.deadline = deadline.map(|d| now + d);
        self.queued = effect;
        if phase == Phase::TearingDown {
            // The tear-down does not wait for the effect in flight: the shell may abandon it,
            // and its answer, if any, is stale.
            self.pending = None;
        }
    }
}

//! Per-second dynamics of the simulated production job: capacity from the ground truth, a
//! backlog carried from second to second, checkpoints, failures with replay, and
//! reconfigurations as a schedule of segments (savepoint, TaskManager start, restore, …).
//!
//! Time is in seconds since the start of the trace (f64, so downtimes need not be whole
//! seconds); [`Job::step`] advances one second `[t, t + 1)`. Pure: no clock, no randomness.

use std::collections::VecDeque;

use super::change;
pub use super::second::{Disruption, JobEvent, Second, SimPhase};
use super::truth::GroundTruth;
use crate::models::space::{JobConfig, SearchSpace};
use crate::policy::{ChangeKind, ReconfigureOutcome};

/// A stretch of a change or a restart; the job runs its steady configuration after the last.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Segment {
    until: f64,
    config: JobConfig,
    processing: bool,
    phase: SimPhase,
    alloc: JobConfig,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct PendingChange {
    ends_at: f64,
    kind: ChangeKind,
    outcome: ReconfigureOutcome,
}

/// The production job.
#[derive(Debug, Clone)]
pub struct Job {
    truth: GroundTruth,
    space: SearchSpace,
    /// The steady configuration (after every queued segment).
    config: JobConfig,
    segments: VecDeque<Segment>,
    change: Option<PendingChange>,
    backlog: f64,
    /// Records processed since the last completed checkpoint: replayed after a failure.
    since_checkpoint: f64,
    next_checkpoint: f64,
    /// When the job last stopped processing (for the latency of a fully-down second).
    stopped_since: f64,
    was_processing: bool,
    recovering_since: Option<f64>,
    deferred_failure: bool,
    /// A change started and the backlog it left is not drained yet.
    change_disruption: bool,
}

impl Job {
    pub fn new(truth: GroundTruth, space: SearchSpace, config: JobConfig) -> Self {
        let next_checkpoint = f64::from(config.checkpoint_interval_s);
        Job {
            truth,
            space,
            config,
            segments: VecDeque::new(),
            change: None,
            backlog: 0.0,
            since_checkpoint: 0.0,
            next_checkpoint,
            stopped_since: 0.0,
            was_processing: true,
            recovering_since: None,
            deferred_failure: false,
            change_disruption: false,
        }
    }

    pub fn config(&self) -> JobConfig {
        self.config
    }

    pub fn backlog(&self) -> f64 {
        self.backlog
    }

    pub fn truth(&self) -> &GroundTruth {
        &self.truth
    }

    /// Whether a reconfiguration is in flight.
    pub fn changing(&self) -> bool {
        self.change.is_some()
    }

    /// End of the queued segments (now, when none).
    fn queue_end(&self, now: f64) -> f64 {
        self.segments.back().map_or(now, |s| s.until.max(now))
    }

    /// A TaskManager dies at `now`: the job restarts from its last checkpoint. While a change or
    /// another restart is in flight the failure waits until the job runs steadily again.
    pub fn fail(&mut self, now: f64, events: &mut Vec<JobEvent>) {
        if !self.segments.is_empty() {
            self.deferred_failure = true;
            return;
        }
        self.deferred_failure = false;
        if let Some(failed_at) = self.recovering_since {
            // The previous failure's backlog is not drained yet: its recovery ends censored.
            events.push(JobEvent::Recovered {
                failed_at,
                recovery_s: now - failed_at,
                censored: true,
            });
        }
        self.backlog += self.since_checkpoint;
        self.since_checkpoint = 0.0;
        self.segments.push_back(Segment {
            until: now + self.truth.failure_downtime_s(&self.config),
            config: self.config,
            processing: false,
            phase: SimPhase::Failed,
            alloc: self.config,
        });
        self.recovering_since = Some(now);
    }

    /// Starts moving to `to` at `now` (after a failure restart in flight, if any). Returns the
    /// kind actually used (the twin decides it from the shapes, whatever the policy claimed),
    /// or `Err(outcome)` at once when another change is in flight.
    pub fn reconfigure(
        &mut self,
        now: f64,
        to: JobConfig,
    ) -> Result<ChangeKind, ReconfigureOutcome> {
        let from = self.config;
        let refused = ReconfigureOutcome {
            running: from,
            succeeded: false,
            downtime_s: 0.0,
        };
        if self.change.is_some() {
            return Err(refused);
        }
        let kind = ChangeKind::between(&from, &to);
        if to == from {
            return Err(ReconfigureOutcome {
                succeeded: true,
                ..refused
            });
        }
        let (runs, plan) = change::plan(&self.truth, &self.space, kind, from, to);
        let start = self.queue_end(now);
        let mut until = start;
        let mut downtime = 0.0;
        for step in plan {
            until += step.duration;
            if !step.processing {
                downtime += step.duration;
            }
            self.segments.push_back(Segment {
                until,
                config: step.config,
                processing: step.processing,
                phase: step.phase,
                alloc: step.alloc,
            });
        }
        let running = if runs { to } else { from };
        self.config = running;
        self.change_disruption = true;
        self.change = Some(PendingChange {
            ends_at: until,
            kind,
            outcome: ReconfigureOutcome {
                running,
                succeeded: runs,
                downtime_s: downtime,
            },
        });
        Ok(kind)
    }

    /// Advances the second `[t, t + 1)` with `rate` events arriving; `events` receives what
    /// finished during it.
    pub fn step(&mut self, t: u64, rate: f64, events: &mut Vec<JobEvent>) -> Second {
        let (start, end) = (t as f64, t as f64 + 1.0);
        // Causes are taken at the start of the second: the second a disruption ends in is still
        // part of it.
        let in_change = self.change_disruption;
        let recovering_since = self.recovering_since;
        // Walk the segments overlapping the second, then the steady configuration.
        let mut budget = 0.0;
        let mut processing_time = 0.0;
        let mut leading_down = 0.0;
        let (mut cpu, mut memory) = (0.0, 0.0);
        let mut phase = SimPhase::Running;
        let mut cursor = start;
        let mut config_at_end = self.config;
        let mut resumed_at: Option<f64> = None;
        while cursor < end {
            let segment = self.segments.front().copied();
            let (until, config, processing, seg_phase, alloc) = match segment {
                Some(s) => (s.until.min(end), s.config, s.processing, s.phase, s.alloc),
                None => (end, self.config, true, SimPhase::Running, self.config),
            };
            let span = (until - cursor).max(0.0);
            if processing {
                budget += self.truth.capacity(&config) * span;
                processing_time += span;
                if !self.was_processing {
                    resumed_at = Some(cursor);
                }
            } else {
                if self.was_processing {
                    self.stopped_since = cursor;
                    if seg_phase == SimPhase::Reconfiguring {
                        // Stop-with-savepoint (or the checkpoint an in-place rescale waits
                        // for) covers everything processed: nothing is ever replayed.
                        self.since_checkpoint = 0.0;
                    }
                }
                if processing_time == 0.0 {
                    leading_down += span;
                }
            }
            self.was_processing = processing;
            cpu += alloc.total_cpu_cores() * span;
            memory += alloc.total_memory_mb() * span;
            phase = phase.max(seg_phase);
            config_at_end = config;
            cursor = until;
            if let Some(s) = segment
                && s.until <= end
            {
                self.segments.pop_front();
            }
        }
        if let Some(resumed) = resumed_at {
            self.next_checkpoint = resumed + f64::from(config_at_end.checkpoint_interval_s);
        }

        let catching_up = self.backlog > 0.0;
        if catching_up {
            budget *= self.truth.catchup_efficiency;
        }
        let backlog_before = self.backlog;
        let available = self.backlog + rate;
        let processed = available.min(budget);
        self.backlog = available - processed;
        self.track_checkpoints(end, processed, processing_time, config_at_end);

        let capacity = self.truth.capacity(&config_at_end);
        let latency_ms = if processing_time == 0.0 {
            self.truth.outcomes(&config_at_end, 0.0).latency_p95_ms
                + (end - self.stopped_since) * 1000.0
        } else {
            let effective = capacity
                * if catching_up {
                    self.truth.catchup_efficiency
                } else {
                    1.0
                };
            self.truth
                .outcomes(&config_at_end, (processed / processing_time).min(capacity))
                .latency_p95_ms
                + (self.backlog / effective + (1.0 - processing_time)) * 1000.0
        };
        if self.backlog > 0.0 && phase == SimPhase::Running {
            phase = SimPhase::CatchingUp;
        }

        let drain = Drain {
            backlog_before,
            rate,
            speed: if processing_time > 0.0 {
                budget / processing_time
            } else {
                0.0
            },
            leading_down,
        };
        self.finish_recovery(start, drain, events);
        if let Some(change) = self.change
            && change.ends_at <= end
        {
            events.push(JobEvent::Reconfigured {
                at: change.ends_at,
                kind: change.kind,
                outcome: change.outcome,
            });
            self.change = None;
        }
        if self.change.is_none() && self.backlog <= 0.0 {
            self.change_disruption = false;
        }
        let disruption = if in_change || self.change_disruption {
            Disruption::Change
        } else if let Some(since) = recovering_since {
            Disruption::Failure { since }
        } else {
            Disruption::None
        };
        if self.deferred_failure && self.segments.is_empty() {
            self.fail(end, events);
        }
        Second {
            t,
            rate,
            processed,
            backlog: self.backlog,
            phase,
            config: config_at_end,
            capacity,
            running_fraction: processing_time,
            latency_ms,
            cpu_alloc: cpu,
            memory_alloc_mb: memory,
            disruption,
        }
    }

    /// Checkpoints complete every interval of processing; what was processed since the last
    /// one is what a failure replays.
    fn track_checkpoints(&mut self, end: f64, processed: f64, processing: f64, config: JobConfig) {
        self.since_checkpoint += processed;
        if processing <= 0.0 {
            return;
        }
        let interval = f64::from(config.checkpoint_interval_s);
        while self.next_checkpoint <= end {
            // Only the part of this second after the checkpoint is left to replay.
            let after = (end - self.next_checkpoint).min(processing);
            self.since_checkpoint = processed * after / processing;
            self.next_checkpoint += interval;
        }
    }

    /// Records the end of a failure's recovery: the first instant the backlog is empty again
    /// once the restart is over.
    fn finish_recovery(&mut self, start: f64, drain: Drain, events: &mut Vec<JobEvent>) {
        let Some(failed_at) = self.recovering_since else {
            return;
        };
        let down_ahead = self.segments.iter().any(|s| !s.processing);
        if down_ahead || self.backlog > 0.0 {
            return;
        }
        // Drained inside this second: the backlog grew while still down, then shrank at the
        // processing speed minus the arrival rate.
        let net = drain.speed - drain.rate;
        let within = if net > 0.0 {
            let at_resume = drain.backlog_before + drain.rate * drain.leading_down;
            (drain.leading_down + at_resume / net).min(1.0)
        } else {
            1.0
        };
        events.push(JobEvent::Recovered {
            failed_at,
            recovery_s: (start + within - failed_at).max(0.0),
            censored: false,
        });
        self.recovering_since = None;
    }
}

/// What one second did to the backlog, for interpolating the instant it drained.
#[derive(Debug, Clone, Copy)]
struct Drain {
    backlog_before: f64,
    rate: f64,
    /// Events/s while processing (catch-up efficiency included).
    speed: f64,
    /// Seconds at the start of the second with nothing processed.
    leading_down: f64,
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;

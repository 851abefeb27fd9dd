//! The executor's records as the CLI sees them ([`demeter_common::protocol::jobs`]): job and
//! operation summaries, the progress events of a running operation, and a `show` answer cut
//! to fit in one frame. Pure.

use demeter_common::codec::encode_frame;
use demeter_common::protocol::jobs::{
    DeploymentSummary, JobDetails, JobReply, JobSummary, OperationStarted, OperationSummary,
    OutcomeSummary, ProgressEvent, ProgressKind,
};
use demeter_common::protocol::{CoordinatorMessage, MAX_FRAME_LEN};

use super::super::journal::JobRecord;
use super::super::operation::{LogEntry, Operation, Outcome, Phase, Step};
use crate::flink::JobState;

/// Longest history line or reason sent (Flink error bodies can be long).
pub const MAX_TEXT: usize = 2000;

pub fn clip(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return text.to_string();
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

pub fn outcome(o: &Outcome) -> OutcomeSummary {
    match o {
        Outcome::Applied(d) => OutcomeSummary::Applied {
            config: d.config.to_string(),
            flink_job: d.job_id.to_string(),
        },
        Outcome::RolledBack { deployment, reason } => OutcomeSummary::RolledBack {
            config: deployment.config.to_string(),
            flink_job: deployment.job_id.to_string(),
            reason: clip(reason),
        },
        Outcome::Aborted { reason } => OutcomeSummary::Aborted {
            reason: clip(reason),
        },
        Outcome::NotStarted { reason } => OutcomeSummary::NotStarted {
            reason: clip(reason),
        },
    }
}

pub fn job(record: &JobRecord, in_flight: Option<u64>, state: Option<JobState>) -> JobSummary {
    JobSummary {
        name: record.name.clone(),
        jar: record.jar.display().to_string(),
        entry_class: record.entry_class.clone(),
        args: record.args.clone(),
        current: record.current.as_ref().map(|d| DeploymentSummary {
            config: d.config.to_string(),
            flink_job: d.job_id.to_string(),
        }),
        flink_state: state.map(|s| format!("{s:?}").to_uppercase()),
        in_flight,
    }
}

pub fn operation(op: &Operation) -> OperationSummary {
    let state = match &op.phase {
        Phase::Finished(o) => format!("{o:?}"),
        Phase::Forward => format!("IN FLIGHT at {}", op.step.name()),
        Phase::RollingBack { attempt, .. } => format!(
            "IN FLIGHT, rollback attempt {attempt} at {}",
            op.step.name()
        ),
    };
    OperationSummary {
        id: op.id,
        strategy: format!("{:?}", op.strategy),
        from: op.from.as_ref().map(|d| d.config.to_string()),
        to: op.to.to_string(),
        state: clip(&state),
        finished: op.is_finished(),
        outcome: op.outcome().map(outcome),
        step: op.step.name().to_string(),
        started_ms: op.started_ms,
        log: op
            .log
            .iter()
            .map(|l| (l.at_ms.saturating_sub(op.started_ms), clip(&l.text)))
            .collect(),
        steps: op.step_durations(),
        savepoint: op.savepoint.clone(),
    }
}

/// A job and its newest `limit` operations (oldest first), fewer if they would not fit in
/// one frame; `omitted` counts those left out.
pub fn details(summary: JobSummary, ops: &[Operation], limit: u32) -> JobDetails {
    let keep = ops.len().min(limit as usize);
    let mut details = JobDetails {
        job: summary,
        operations: ops[ops.len() - keep..].iter().map(operation).collect(),
        omitted: (ops.len() - keep) as u32,
    };
    // Room for the frame's own envelope.
    let fits = |d: &JobDetails| {
        let msg = CoordinatorMessage::Job(JobReply::Details(d.clone()));
        encode_frame(&msg).is_ok_and(|f| f.len() + 64 <= MAX_FRAME_LEN)
    };
    while !details.operations.is_empty() && !fits(&details) {
        details.operations.remove(0);
        details.omitted += 1;
    }
    details
}

/// Job summaries that fit in one frame: without their program arguments if needed (`show`
/// has them), then as many as fit.
pub fn fit_list(mut jobs: Vec<JobSummary>) -> Vec<JobSummary> {
    let fits = |jobs: &Vec<JobSummary>| {
        let msg = CoordinatorMessage::Job(JobReply::Jobs(jobs.clone()));
        encode_frame(&msg).is_ok_and(|f| f.len() + 64 <= MAX_FRAME_LEN)
    };
    if !fits(&jobs) {
        for job in &mut jobs {
            job.args.clear();
        }
    }
    while !jobs.is_empty() && !fits(&jobs) {
        jobs.pop();
    }
    jobs
}

/// Turns the journal records of one running operation into the progress events a CLI sees:
/// `Started` once, then per record the new history lines, the step that finished and the
/// step that started.
#[derive(Debug, Default)]
pub struct Progress {
    op: Option<u64>,
    last_line: Option<LogEntry>,
    step: Option<(Step, u64)>,
}

impl Progress {
    /// Whether an operation was seen (its `Started` sent).
    pub fn started(&self) -> bool {
        self.op.is_some()
    }

    pub fn events(&mut self, op: &Operation, finished: Option<Step>) -> Vec<JobReply> {
        let mut out = Vec::new();
        if self.op != Some(op.id) {
            *self = Self {
                op: Some(op.id),
                ..Self::default()
            };
            out.push(JobReply::Started(OperationStarted {
                op: op.id,
                job: op.job.clone(),
                strategy: format!("{:?}", op.strategy),
                from: op.from.as_ref().map(|d| d.config.to_string()),
                to: op.to.to_string(),
            }));
        }
        let elapsed = |at: u64| at.saturating_sub(op.started_ms);
        let event = |elapsed_ms, kind| {
            JobReply::Progress(ProgressEvent {
                op: op.id,
                elapsed_ms,
                kind,
            })
        };
        // The history is capped (its second line onwards rolls): new lines are those after
        // the last one sent.
        let from = self
            .last_line
            .as_ref()
            .and_then(|last| op.log.iter().rposition(|l| l == last))
            .map_or(0, |i| i + 1);
        for line in &op.log[from..] {
            out.push(event(
                elapsed(line.at_ms),
                ProgressKind::Note(clip(&line.text)),
            ));
        }
        self.last_line = op.log.last().cloned().or(self.last_line.take());
        if let (Some(done), Some((step, since))) = (finished, self.step)
            && done == step
        {
            let kind = ProgressKind::StepFinished {
                step: step.name().to_string(),
                took_ms: op.step_started_ms.saturating_sub(since),
            };
            out.push(event(elapsed(op.step_started_ms), kind));
        }
        if self.step.map(|(s, _)| s) != Some(op.step) || finished.is_some() {
            if op.step != Step::Done {
                let kind = ProgressKind::StepStarted {
                    step: op.step.name().to_string(),
                };
                out.push(event(elapsed(op.step_started_ms), kind));
            }
            self.step = Some((op.step, op.step_started_ms));
        }
        out
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;

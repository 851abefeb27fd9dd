#![allow(clippy::unwrap_used, clippy::expect_used)]

use demeter_common::codec::encode_frame;
use demeter_common::protocol::jobs::{JobReply, ProgressKind};
use demeter_common::protocol::{CoordinatorMessage, MAX_FRAME_LEN};

use super::super::super::effects::{Effect, Event, JobView};
use super::super::super::machine::{Limits, Machine};
use super::super::super::operation::{Deployment, MAX_LOG, Operation};
use super::super::super::plan::Strategy;
use super::*;
use crate::flink::{JobId, JobState};

/// An in-place change driven to its end by hand; every journal record with its `finished`.
fn in_place_records() -> Vec<(Operation, Option<Step>)> {
    let from = Deployment {
        config: "p=1,slots=2,mem=1g,cpu=1,ckpt=5".parse().unwrap(),
        job_id: JobId::from("j"),
        taskmanagers: None,
    };
    let to = "p=2,slots=2,mem=1g,cpu=1,ckpt=5".parse().unwrap();
    let mut m = Machine::start(
        1,
        "bench",
        "c",
        Strategy::InPlace,
        Some(from),
        to,
        1_000,
        Limits::default(),
    );
    let (mut now, mut records, mut emitted) = (1_000, Vec::new(), 0.0);
    for _ in 0..100 {
        while let Some(effect) = m.poll_effect() {
            now += 700;
            let event = match effect {
                Effect::Journal { op, finished } => {
                    records.push((*op, finished));
                    continue;
                }
                Effect::Rescale { .. } => Event::Rescaled(Ok(())),
                Effect::QueryJob { .. } => {
                    emitted += 10.0;
                    Event::Job(Ok(Some(JobView {
                        state: JobState::Running,
                        all_running: true,
                        vertices: vec![(2, Some(128))],
                        source_records: Some(emitted),
                    })))
                }
                other => panic!("unexpected {other:?}"),
            };
            m.handle_event(now, event);
        }
        if m.is_finished() {
            return records;
        }
        now = m.poll_timeout().unwrap();
        m.handle_timeout(now);
    }
    panic!("did not finish")
}

#[test]
fn progress_says_started_each_step_and_line_once_with_times() {
    let mut progress = Progress::default();
    assert!(!progress.started());
    let mut events = Vec::new();
    for (op, finished) in in_place_records() {
        events.extend(progress.events(&op, finished));
    }
    assert!(progress.started());
    let JobReply::Started(started) = &events[0] else {
        panic!("{:?}", events[0])
    };
    assert_eq!((started.strategy.as_str(), started.op), ("InPlace", 1));
    let mut steps = Vec::new();
    let mut notes = Vec::new();
    let mut last_elapsed = 0;
    for e in &events[1..] {
        let JobReply::Progress(p) = e else {
            panic!("{e:?}")
        };
        assert!(
            p.elapsed_ms >= last_elapsed,
            "time goes forward: {events:#?}"
        );
        last_elapsed = p.elapsed_ms;
        match &p.kind {
            ProgressKind::StepStarted { step } => steps.push(format!("+{step}")),
            ProgressKind::StepFinished { step, took_ms } => {
                assert!(*took_ms > 0);
                steps.push(format!("-{step}"))
            }
            ProgressKind::Note(text) => notes.push(text.clone()),
        }
    }
    assert_eq!(
        steps,
        ["+rescale", "-rescale", "+wait-running", "-wait-running"]
    );
    let (op, _) = in_place_records().pop().unwrap();
    let history: Vec<_> = op.log.iter().map(|l| l.text.clone()).collect();
    assert_eq!(notes, history, "every history line, once, in order");
}

#[test]
fn a_rolling_history_still_yields_only_new_lines() {
    let (mut op, _) = in_place_records().pop().unwrap();
    while op.log.len() < MAX_LOG {
        op.note(
            op.started_ms + op.log.len() as u64,
            format!("line {}", op.log.len()),
        );
    }
    let mut progress = Progress::default();
    progress.events(&op, None);
    op.note(op.started_ms + 10_000, "newest");
    assert_eq!(op.log.len(), MAX_LOG, "capped: the second line rolled out");
    let events = progress.events(&op, None);
    let notes: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            JobReply::Progress(p) => match &p.kind {
                ProgressKind::Note(t) => Some(t.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(notes, ["newest"]);
}

#[test]
fn show_keeps_the_newest_operations_that_fit_in_a_frame() {
    let (base, _) = in_place_records().pop().unwrap();
    let record = JobRecord::for_tests(None);
    // 30 operations with full, long histories: far more than one frame.
    let ops: Vec<Operation> = (0..30u64)
        .map(|i| {
            let mut op = base.clone();
            op.id = i;
            while op.log.len() < MAX_LOG {
                op.note(op.started_ms, "x".repeat(MAX_TEXT + 100));
            }
            op
        })
        .collect();
    let d = details(job(&record, None, None), &ops, 20);
    assert!(d.operations.len() < 20, "{}", d.operations.len());
    assert_eq!(d.omitted as usize + d.operations.len(), 30);
    assert_eq!(d.operations.last().unwrap().id, 29, "the newest is kept");
    let frame = encode_frame(&CoordinatorMessage::Job(JobReply::Details(d))).unwrap();
    assert!(frame.len() <= MAX_FRAME_LEN);

    let small = details(job(&record, Some(3), Some(JobState::Failed)), &ops[..5], 2);
    assert_eq!((small.operations.len(), small.omitted), (2, 3));
    assert_eq!(small.job.flink_state.as_deref(), Some("FAILED"));
    assert_eq!(small.operations[1].steps.len(), 2);
}

#[test]
fn clip_cuts_long_text_on_a_character_boundary() {
    let text = "é".repeat(MAX_TEXT);
    let cut = clip(&text);
    assert!(cut.len() <= MAX_TEXT + '…'.len_utf8());
    assert!(cut.ends_with('…'));
    assert_eq!(clip("short"), "short");
}

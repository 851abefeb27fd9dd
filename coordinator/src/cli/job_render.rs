//! What `job` prints, the same in local mode and against the daemon: both turn their records
//! into the wire summaries first ([`demeter_coordinator::executor::service::wire`]).

use anyhow::bail;
use demeter_common::protocol::JobReply;
use demeter_common::protocol::jobs::{JobDetails, JobSummary, OutcomeSummary, ProgressKind};

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// One progress event of a running operation, as a line (or nothing).
pub fn progress(reply: &JobReply) {
    match reply {
        JobReply::Started(s) => println!("operation {} ({}) of {}", s.op, s.strategy, s.job),
        JobReply::Progress(p) => match &p.kind {
            ProgressKind::Note(text) => println!("[{:7.1}s] {text}", secs(p.elapsed_ms)),
            ProgressKind::StepStarted { step } => {
                println!("[{:7.1}s] → {step}", secs(p.elapsed_ms))
            }
            // The history line `<step> done in N ms` says it already.
            ProgressKind::StepFinished { .. } => {}
        },
        _ => {}
    }
}

/// The final line of an apply; an error when the job does not run.
pub fn outcome(job: &str, outcome: &OutcomeSummary) -> anyhow::Result<()> {
    match outcome {
        OutcomeSummary::Applied { config, flink_job } => {
            println!("applied: {job} runs {config} as job {flink_job}")
        }
        OutcomeSummary::RolledBack {
            config,
            flink_job,
            reason,
        } => println!("rolled back ({reason}): {job} runs {config} as job {flink_job}"),
        OutcomeSummary::Aborted { reason } => println!("aborted, nothing changed: {reason}"),
        OutcomeSummary::NotStarted { reason } => bail!("{job} did not start: {reason}"),
    }
    Ok(())
}

pub fn registered(job: &JobSummary) {
    println!(
        "registered {} ({})",
        job.name,
        job.current
            .as_ref()
            .map_or("not running".into(), |d| format!(
                "runs {} as {}",
                d.config, d.flink_job
            ))
    );
}

fn running(job: &JobSummary) -> String {
    match &job.current {
        Some(d) => format!(
            "runs {} as Flink job {}{}",
            d.config,
            d.flink_job,
            job.flink_state
                .as_ref()
                .map_or(String::new(), |s| format!(" ({s})"))
        ),
        None => "not running".into(),
    }
}

pub fn details(d: &JobDetails, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(d)?);
        return Ok(());
    }
    let job = &d.job;
    println!(
        "job {}: {} {} {}",
        job.name,
        job.jar,
        job.entry_class,
        job.args.join(" ")
    );
    println!("{}", running(job));
    if d.omitted > 0 {
        println!("({} older operations not shown)", d.omitted);
    }
    for op in &d.operations {
        println!(
            "\noperation {} ({} → {}): {}",
            op.id, op.strategy, op.to, op.state
        );
        for (at, text) in &op.log {
            println!("  [{:7.1}s] {text}", secs(*at));
        }
    }
    Ok(())
}

pub fn list(jobs: &[JobSummary], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(jobs)?);
        return Ok(());
    }
    for job in jobs {
        let busy = job
            .in_flight
            .map_or(String::new(), |op| format!(", operation {op} in flight"));
        println!("{:<24} {}{busy}", job.name, running(job));
    }
    println!("{} job(s)", jobs.len());
    Ok(())
}

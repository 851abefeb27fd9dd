//! `job …` against the running coordinator daemon: one request on a QUIC session with a `cli`
//! certificate; an apply prints the progress the daemon streams while its agents restart the
//! TaskManagers. The operation belongs to the daemon: if this CLI dies or the connection is
//! lost, it goes on (or is resumed when the daemon restarts); `job show` follows it.

use anyhow::{Context, bail};
use demeter_common::protocol::jobs::{JobApply, JobRegistration};
use demeter_common::protocol::{
    AgentMessage, Capability, CoordinatorMessage, JobReply, JobRequest,
};
use demeter_common::tls::TlsPaths;
use demeter_coordinator::executor::driver::now_ms;

use super::job::{JobCommand, RemoteArgs, read_space};
use super::job_render;
use super::remote::Session;

pub(super) async fn dispatch(remote: &RemoteArgs, command: JobCommand) -> anyhow::Result<()> {
    let json = match &command {
        JobCommand::Show { json, .. }
        | JobCommand::List { json }
        | JobCommand::Tuning { json, .. } => *json,
        _ => false,
    };
    let watch = match &command {
        JobCommand::Tuning { watch, .. } => watch.map(|s| std::time::Duration::from_secs(s.max(1))),
        _ => None,
    };
    let request = match command {
        JobCommand::Register(r) => JobRequest::Register(JobRegistration {
            space_toml: read_space(r.space.as_ref())?.map(|(text, _)| text),
            name: r.name,
            jar: std::path::absolute(&r.jar)
                .unwrap_or(r.jar)
                .to_string_lossy()
                .into_owned(),
            entry_class: r.entry_class,
            args: r.args,
            qos_latency_ms: r.qos_latency_ms,
            qos_recovery_s: r.qos_recovery_s,
            savepoint_dir: r.savepoint_dir,
        }),
        JobCommand::Apply(a) => JobRequest::Apply(JobApply {
            change: a.change()?,
            job: a.name,
            deadline_ms: now_ms() + a.start_within * 1000,
        }),
        JobCommand::Show {
            name, operations, ..
        } => JobRequest::Show {
            job: name,
            operations,
        },
        JobCommand::List { .. } => JobRequest::List,
        JobCommand::Tuning { name, last, .. } => JobRequest::Tuning { job: name, last },
        JobCommand::Resume => bail!(
            "the daemon resumes operations left in flight by itself when it starts; follow them with `job show`"
        ),
    };
    // Checked here too, so a mistake is explained before anything is sent.
    if let Err(reason) = request.validate() {
        bail!("{reason}");
    }
    let addr = remote.coordinator.context("--coordinator is needed")?;
    let tls = TlsPaths {
        ca: remote
            .ca
            .clone()
            .context("--ca is needed with --coordinator")?,
        cert: remote
            .cert
            .clone()
            .context("--cert is needed with --coordinator")?,
        key: remote
            .key
            .clone()
            .context("--key is needed with --coordinator")?,
    };
    let mut session =
        Session::connect(addr, &remote.server_name, tls, vec![Capability::Jobs]).await?;
    let result = match watch {
        None => {
            session.send(&AgentMessage::Job(request)).await?;
            answers(&mut session, json).await
        }
        Some(every) => loop {
            session.send(&AgentMessage::Job(request.clone())).await?;
            // Clear the terminal and draw again, like `watch`.
            print!("\x1b[2J\x1b[H");
            if let Err(e) = answers(&mut session, json).await {
                break Err(e);
            }
            tokio::time::sleep(every).await;
        },
    };
    session.close().await;
    result
}

/// Prints the daemon's answers until the last one.
async fn answers(session: &mut Session, json: bool) -> anyhow::Result<()> {
    let mut started = None;
    loop {
        let reply = match session.next().await {
            Ok(CoordinatorMessage::Job(reply)) => reply,
            Ok(other) => bail!("unexpected answer: {other:?}"),
            Err(e) => match started {
                Some(op) => {
                    return Err(e.context(format!(
                        "operation {op} goes on in the daemon, or resumes when it restarts; follow it with `job show`"
                    )));
                }
                None => return Err(e),
            },
        };
        match &reply {
            JobReply::Started(s) => {
                started = Some(s.op);
                job_render::progress(&reply);
            }
            JobReply::Progress(_) => job_render::progress(&reply),
            JobReply::Finished(end) => return job_render::outcome(&end.job, &end.outcome),
            JobReply::Registered(job) => {
                job_render::registered(job);
                return Ok(());
            }
            JobReply::Details(details) => return job_render::details(details, json),
            JobReply::Jobs(jobs) => return job_render::list(jobs, json),
            JobReply::Tuning(view) => return super::tuning_render::tuning(view, json),
            JobReply::Refused(reason) => bail!("refused: {reason}"),
            JobReply::Failed(reason) => bail!(
                "the daemon could not finish the operation ({reason}); it stays in flight and resumes at the daemon's next start"
            ),
        }
    }
}

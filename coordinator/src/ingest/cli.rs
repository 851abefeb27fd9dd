//! CLI peers (role `cli`): the fleet view and job requests, one request at a time on the
//! control stream. What a CLI may ask is what its hello announced ([`Capability::FleetQuery`],
//! [`Capability::Jobs`]); anything else closes the connection.

use demeter_common::protocol::{
    AgentMessage, Capability, CoordinatorMessage, JobReply, JobRequest, MAX_FLEET_PAGE,
};
use demeter_common::{Error as WireError, transport};
use tokio::sync::mpsc;

use super::Shared;
use super::session::{handshake, variant_name};
use crate::error::{Error, Result};

/// Replies one job request may have queued before the session writes them out.
const REPLY_QUEUE: usize = 1024;

/// Answers job requests: the daemon's executor service.
pub trait JobService: Send + Sync + std::fmt::Debug {
    /// Starts answering `request` (already checked with [`JobRequest::validate`]). Replies go
    /// to `replies` in order; the exchange ends when the service drops the sender. Must not
    /// block: long work (an apply) is spawned, and goes on if the CLI leaves.
    fn handle(self: std::sync::Arc<Self>, request: JobRequest, replies: mpsc::Sender<JobReply>);
}

pub(super) async fn serve_cli(connection: &quinn::Connection, shared: &Shared) -> Result<()> {
    let (mut send, mut recv, hello) = handshake(connection, shared).await?;
    let fleet = hello.capabilities.contains(&Capability::FleetQuery);
    let jobs = hello.capabilities.contains(&Capability::Jobs);
    if !fleet && !jobs {
        return Err(Error::Protocol(WireError::Certificate(
            "CLI peers must announce FleetQuery or Jobs".into(),
        )));
    }
    transport::write_preamble(&mut send).await?;
    while let Some(msg) = transport::read_frame::<AgentMessage>(&mut recv).await? {
        match msg {
            AgentMessage::FleetQuery(query) if fleet => {
                let limit = query.limit.clamp(1, MAX_FLEET_PAGE) as usize;
                let page = shared
                    .fleet
                    .lock()
                    .map(|f| f.summaries_page(query.after.as_deref(), limit))
                    .unwrap_or_default();
                transport::write_frame(&mut send, &CoordinatorMessage::Fleet(page)).await?;
            }
            AgentMessage::Job(request) if jobs => answer_job(request, &mut send, shared).await?,
            other => {
                return Err(Error::Protocol(WireError::UnexpectedMessage {
                    expected: "a request the hello announced",
                    got: variant_name(&other),
                }));
            }
        }
    }
    let _ = send.finish();
    Ok(())
}

async fn answer_job(
    request: JobRequest,
    send: &mut quinn::SendStream,
    shared: &Shared,
) -> Result<()> {
    let refuse = |reason: String| CoordinatorMessage::Job(JobReply::Refused(reason));
    if let Err(reason) = request.validate() {
        return Ok(transport::write_frame(send, &refuse(reason)).await?);
    }
    let Some(service) = shared.jobs.get() else {
        let reason = "this coordinator runs no executor".to_string();
        return Ok(transport::write_frame(send, &refuse(reason)).await?);
    };
    let (replies, mut answers) = mpsc::channel(REPLY_QUEUE);
    service.clone().handle(request, replies);
    while let Some(reply) = answers.recv().await {
        transport::write_frame(send, &CoordinatorMessage::Job(reply)).await?;
    }
    Ok(())
}

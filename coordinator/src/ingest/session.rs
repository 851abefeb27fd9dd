//! One connection from its TLS handshake to its end. Any protocol breach closes that connection
//! with a reason and leaves every other session alone.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use demeter_common::protocol::{
    AgentMessage, Capability, CoordinatorMessage, Hello, Role, Welcome, close_code,
};
use demeter_common::{Error as WireError, tls, transport};
use tokio::sync::oneshot;
use tracing::{Instrument, debug, info, info_span, warn};

use super::writer::WriteRequest;
use super::{Shared, now_ms};
use crate::error::{Error, Result};

pub(super) async fn accept_loop(endpoint: quinn::Endpoint, shared: Arc<Shared>) {
    while let Some(incoming) = endpoint.accept().await {
        let shared = shared.clone();
        let remote = incoming.remote_address();
        tokio::spawn(
            async move {
                match incoming.await {
                    Ok(connection) => serve(connection, shared).await,
                    Err(e) => {
                        // A peer without a valid certificate ends here: TLS refused it.
                        shared
                            .stats
                            .refused_handshakes
                            .fetch_add(1, Ordering::Relaxed);
                        warn!(%remote, error = %e, "refused connection");
                    }
                }
            }
            .instrument(info_span!("conn", %remote)),
        );
    }
}

/// Closes the connection with a code and a reason the peer can read.
fn close(connection: &quinn::Connection, error: &Error) {
    let code = match error {
        Error::Protocol(WireError::UnsupportedVersion { .. }) => close_code::UNSUPPORTED_VERSION,
        Error::Protocol(WireError::Certificate(_)) => close_code::FORBIDDEN,
        _ => close_code::PROTOCOL_VIOLATION,
    };
    let reason: String = error.to_string().chars().take(200).collect();
    connection.close(code.into(), reason.as_bytes());
}

async fn serve(connection: quinn::Connection, shared: Arc<Shared>) {
    let peer = match tls::peer_identity(&connection) {
        Ok(peer) => peer,
        Err(e) => {
            shared
                .stats
                .refused_handshakes
                .fetch_add(1, Ordering::Relaxed);
            warn!(error = %e, "refused peer");
            close(&connection, &Error::Protocol(e));
            return;
        }
    };
    let span = info_span!("peer", name = %peer.name, role = %peer.role);
    async {
        let result = match peer.role {
            Role::Agent => serve_agent(&connection, &peer.name, &shared).await,
            Role::Cli => super::cli::serve_cli(&connection, &shared).await,
            Role::Coordinator => Err(Error::Protocol(WireError::Certificate(
                "coordinator certificates may not connect as peers".into(),
            ))),
        };
        match result {
            Ok(()) => debug!("connection ended"),
            Err(Error::Protocol(WireError::Connection(e))) => info!(reason = %e, "connection lost"),
            Err(e) => {
                shared.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                warn!(error = %e, "closing connection");
                close(&connection, &e);
            }
        }
    }
    .instrument(span)
    .await
}

pub(super) async fn handshake(
    connection: &quinn::Connection,
    shared: &Shared,
) -> Result<(quinn::SendStream, quinn::RecvStream, Hello)> {
    let timeout = Duration::from_secs(shared.config.handshake_timeout_secs);
    let exchange = async {
        let (send, mut recv) = connection.accept_bi().await.map_err(WireError::from)?;
        transport::read_preamble(&mut recv).await?;
        match transport::expect_frame::<AgentMessage>(&mut recv).await? {
            AgentMessage::Hello(hello) => Ok((send, recv, hello)),
            other => Err(Error::Protocol(WireError::UnexpectedMessage {
                expected: "Hello",
                got: variant_name(&other),
            })),
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| Error::Protocol(WireError::Stream(format!("no hello within {timeout:?}"))))?
}

pub(super) fn variant_name(msg: &AgentMessage) -> String {
    match msg {
        AgentMessage::Hello(_) => "Hello",
        AgentMessage::Metrics(_) => "Metrics",
        AgentMessage::OrderResult(_) => "OrderResult",
        AgentMessage::FleetQuery(_) => "FleetQuery",
        AgentMessage::Job(_) => "Job",
    }
    .to_string()
}

async fn serve_agent(
    connection: &quinn::Connection,
    name: &str,
    shared: &Arc<Shared>,
) -> Result<()> {
    let (mut control, _control_recv, hello) = handshake(connection, shared).await?;
    let cli_only = [Capability::FleetQuery, Capability::Jobs];
    if hello.capabilities.iter().any(|c| cli_only.contains(c)) {
        return Err(Error::Protocol(WireError::Certificate(
            "an agent certificate may not make CLI requests; use one with role cli".into(),
        )));
    }
    let agent: Arc<str> = Arc::from(name);
    let stored_up_to = {
        let store = shared.store.clone();
        let (agent, boot) = (agent.clone(), hello.boot_id);
        tokio::task::spawn_blocking(move || store.stored_up_to(&agent, boot))
            .await
            .map_err(|e| Error::Store(e.to_string()))??
    };
    transport::write_preamble(&mut control).await?;
    let welcome = Welcome {
        peer_name: name.to_string(),
        coordinator_software: env!("CARGO_PKG_VERSION").to_string(),
        stored_up_to,
    };
    transport::write_frame(&mut control, &CoordinatorMessage::Welcome(welcome)).await?;

    let id = shared.next_connection_id.fetch_add(1, Ordering::Relaxed);
    let replaced = shared.fleet.lock().ok().and_then(|mut fleet| {
        fleet.connected(
            name,
            id,
            connection.remote_address().to_string(),
            hello.software.clone(),
            hello.boot_id,
            stored_up_to,
            now_ms(),
        )
    });
    let old = shared
        .connections
        .lock()
        .ok()
        .and_then(|mut c| c.insert(name.to_string(), (id, connection.clone())));
    if let (Some(_), Some((_, old))) = (replaced, old) {
        old.close(close_code::NORMAL.into(), b"replaced by a newer connection");
    }
    info!(boot = hello.boot_id, stored_up_to, software = %hello.software, "agent connected");

    let result = receive_metrics(connection, &agent, hello.boot_id, &mut control, shared).await;

    if let Ok(mut fleet) = shared.fleet.lock() {
        fleet.disconnected(name, id);
    }
    if let Ok(mut connections) = shared.connections.lock()
        && connections
            .get(name)
            .is_some_and(|(current, _)| *current == id)
    {
        connections.remove(name);
    }
    result
}

/// Reads metric streams one after the other; each batch is acknowledged on the control stream
/// once it is durable.
async fn receive_metrics(
    connection: &quinn::Connection,
    agent: &Arc<str>,
    boot_id: u64,
    control: &mut quinn::SendStream,
    shared: &Shared,
) -> Result<()> {
    loop {
        let mut recv = connection.accept_uni().await.map_err(WireError::from)?;
        transport::read_preamble(&mut recv).await?;
        while let Some(msg) = transport::read_frame::<AgentMessage>(&mut recv).await? {
            let AgentMessage::Metrics(batch) = msg else {
                return Err(Error::Protocol(WireError::UnexpectedMessage {
                    expected: "Metrics",
                    got: variant_name(&msg),
                }));
            };
            if batch.boot_id != boot_id || batch.first_seq == 0 {
                return Err(Error::Protocol(WireError::Decode(format!(
                    "batch of boot {} starting at {} on a connection of boot {boot_id}",
                    batch.boot_id, batch.first_seq
                ))));
            }
            let (reply, answer) = oneshot::channel();
            shared
                .writer
                .send(WriteRequest {
                    agent: agent.clone(),
                    batch: batch.clone(),
                    reply,
                })
                .await
                .map_err(|_| Error::Store("store writer stopped".into()))?;
            let appended = answer
                .await
                .map_err(|_| Error::Store("store writer dropped a batch".into()))??;
            shared.stats.batches.fetch_add(1, Ordering::Relaxed);
            shared
                .stats
                .samples_stored
                .fetch_add(appended.stored, Ordering::Relaxed);
            shared
                .stats
                .duplicates_dropped
                .fetch_add(appended.duplicates, Ordering::Relaxed);
            if appended.gap > 0 {
                warn!(
                    missing = appended.gap,
                    before_seq = batch.first_seq,
                    "agent dropped samples before sending"
                );
            }
            if appended.stored > 0
                && let Ok(mut fleet) = shared.fleet.lock()
            {
                let fresh = &batch.samples[appended.duplicates as usize..];
                fleet.record(
                    agent,
                    batch.first_seq + appended.duplicates,
                    fresh,
                    appended.stored_up_to,
                );
            }
            let ack = CoordinatorMessage::Ack {
                boot_id,
                stored_up_to: appended.stored_up_to,
            };
            transport::write_frame(control, &ack).await?;
        }
    }
}

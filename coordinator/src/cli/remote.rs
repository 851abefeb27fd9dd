//! A CLI session with the running coordinator over QUIC: mutual TLS with a `cli` certificate,
//! a hello announcing what the CLI will ask, then requests and answers on one stream.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use demeter_common::protocol::{AgentMessage, Capability, CoordinatorMessage, Hello};
use demeter_common::tls::{self, NodeIdentity, TlsPaths};
use demeter_common::transport;

pub struct Session {
    endpoint: quinn::Endpoint,
    connection: quinn::Connection,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
}

impl Session {
    pub async fn connect(
        addr: SocketAddr,
        server_name: &str,
        tls_paths: TlsPaths,
        capabilities: Vec<Capability>,
    ) -> anyhow::Result<Self> {
        let identity = NodeIdentity::load(&tls_paths)?;
        let mut endpoint = quinn::Endpoint::client(SocketAddr::from(([0, 0, 0, 0], 0)))?;
        endpoint.set_default_client_config(tls::client_config(&identity)?);
        let connection = endpoint
            .connect(addr, server_name)?
            .await
            .with_context(|| format!("connecting to the coordinator at {addr}"))?;
        let (mut send, mut recv) = connection.open_bi().await?;
        transport::write_preamble(&mut send).await?;
        let hello = Hello {
            boot_id: 0,
            software: format!("demeter-coordinator-cli {}", env!("CARGO_PKG_VERSION")),
            capabilities,
        };
        transport::write_frame(&mut send, &AgentMessage::Hello(hello)).await?;
        if let Err(e) = transport::read_preamble(&mut recv).await {
            bail!("the coordinator refused us: {}", closed_why(&connection, e));
        }
        Ok(Self {
            endpoint,
            connection,
            send,
            recv,
        })
    }

    /// Sends one request. A request too large for a frame is refused here, before sending.
    pub async fn send(&mut self, msg: &AgentMessage) -> anyhow::Result<()> {
        transport::write_frame(&mut self.send, msg)
            .await
            .context("sending the request")
    }

    /// The next answer; a connection lost meanwhile is said plainly.
    pub async fn next(&mut self) -> anyhow::Result<CoordinatorMessage> {
        match transport::read_frame::<CoordinatorMessage>(&mut self.recv).await {
            Ok(Some(msg)) => Ok(msg),
            Ok(None) => bail!("the coordinator ended the session"),
            Err(e) => bail!(
                "lost the connection to the coordinator: {}",
                closed_why(&self.connection, e)
            ),
        }
    }

    pub async fn close(self) {
        self.connection.close(0u32.into(), b"done");
        self.endpoint.wait_idle().await;
    }
}

/// The coordinator's own reason when it closed the connection, else the transport error.
fn closed_why(connection: &quinn::Connection, error: demeter_common::Error) -> String {
    match connection.close_reason() {
        Some(quinn::ConnectionError::ApplicationClosed(close)) => {
            String::from_utf8_lossy(&close.reason).into_owned()
        }
        _ => error.to_string(),
    }
}

//! QUIC peers the daemons must cope with: well-behaved ones and deliberately bad ones.

use std::net::SocketAddr;
use std::sync::Arc;

use demeter_common::protocol::{
    AgentMessage, AgentSummary, Capability, CoordinatorMessage, Hello, Welcome,
};
use demeter_common::tls::{self, NodeIdentity};
use demeter_common::transport;

use crate::Pki;

pub fn endpoint(config: quinn::ClientConfig) -> quinn::Endpoint {
    let mut endpoint = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    endpoint.set_default_client_config(config);
    endpoint
}

pub fn endpoint_for(identity: &NodeIdentity) -> quinn::Endpoint {
    endpoint(tls::client_config(identity).unwrap())
}

/// Trusts the cluster CA but presents no certificate of its own.
pub fn endpoint_without_certificate(pki: &Pki) -> quinn::Endpoint {
    let mut roots = rustls::RootCertStore::empty();
    for ca in pki.identity("coordinator").ca {
        roots.add(ca).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![tls::ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(config).unwrap();
    endpoint(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// An agent-like session after the handshake. Keep the control streams: dropping them tells the
/// coordinator its acknowledgements are unwanted.
#[derive(Debug)]
pub struct Session {
    pub connection: quinn::Connection,
    pub welcome: Welcome,
    pub control: quinn::SendStream,
    pub control_recv: quinn::RecvStream,
}

/// Connects and says hello as an agent; the error says how far it got.
pub async fn hello(endpoint: &quinn::Endpoint, addr: SocketAddr) -> Result<Session, String> {
    let connecting = endpoint
        .connect(addr, "coordinator")
        .map_err(|e| e.to_string())?;
    hello_over(connecting).await
}

/// [`hello`] as `identity`, over an endpoint many simulated agents share (one UDP socket for
/// thousands of connections, as behind a NAT).
pub async fn hello_as(
    endpoint: &quinn::Endpoint,
    identity: &NodeIdentity,
    addr: SocketAddr,
) -> Result<Session, String> {
    let config = tls::client_config(identity).map_err(|e| e.to_string())?;
    let connecting = endpoint
        .connect_with(config, addr, "coordinator")
        .map_err(|e| e.to_string())?;
    hello_over(connecting).await
}

async fn hello_over(connecting: quinn::Connecting) -> Result<Session, String> {
    let connection = connecting.await.map_err(|e| format!("handshake: {e}"))?;
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
    transport::write_preamble(&mut send)
        .await
        .map_err(|e| e.to_string())?;
    let hello = Hello {
        boot_id: 1,
        software: "test-peer".into(),
        capabilities: vec![Capability::Metrics],
    };
    transport::write_frame(&mut send, &AgentMessage::Hello(hello))
        .await
        .map_err(|e| e.to_string())?;
    transport::read_preamble(&mut recv)
        .await
        .map_err(|e| e.to_string())?;
    match transport::expect_frame::<CoordinatorMessage>(&mut recv)
        .await
        .map_err(|e| e.to_string())?
    {
        CoordinatorMessage::Welcome(welcome) => Ok(Session {
            connection,
            welcome,
            control: send,
            control_recv: recv,
        }),
        other => Err(format!("unexpected {other:?}")),
    }
}

/// What the coordinator said when it closed the connection.
pub async fn close_reason(connection: &quinn::Connection) -> (u64, String) {
    match connection.closed().await {
        quinn::ConnectionError::ApplicationClosed(close) => (
            close.error_code.into_inner(),
            String::from_utf8_lossy(&close.reason).into_owned(),
        ),
        other => (u64::MAX, other.to_string()),
    }
}

/// The fleet as `demeter-coordinator agents --json` prints it.
pub fn fleet(pki: &Pki, addr: SocketAddr) -> Vec<AgentSummary> {
    let output = crate::process::coordinator_cli(pki, "cli", "agents")
        .args(["--json", "--addr", &addr.to_string()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "agents query failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

pub fn stored_up_to(pki: &Pki, addr: SocketAddr, agent: &str) -> Option<u64> {
    fleet(pki, addr)
        .into_iter()
        .find(|a| a.name == agent)
        .map(|a| a.stored_up_to)
}

//! The QUIC server agents report to: one session per agent connection, a group-committing
//! store writer, the in-memory fleet view, and orders sent to agents.

mod cli;
mod fleet;
mod session;
mod writer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use demeter_common::protocol::{
    AgentMessage, AgentSummary, CoordinatorMessage, Order, OrderKind, OrderResult,
};
use demeter_common::transport;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use cli::JobService;
pub use fleet::Fleet;

use crate::error::{Error, Result};
use crate::store::Store;

/// Ingest settings (the `[ingest]` table of the coordinator config).
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// How much recent history per agent the in-memory window keeps, in seconds.
    pub window_secs: u64,
    /// Most batches stored in one group commit.
    pub max_group: usize,
    /// Seconds a new connection has to open its control stream and say hello.
    pub handshake_timeout_secs: u64,
    /// Receive buffer asked for on the QUIC socket, in bytes; the kernel caps it at
    /// `net.core.rmem_max`. Thousands of agents overflow the default buffer (see `common::udp`).
    pub udp_receive_buffer_bytes: usize,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            window_secs: 600,
            max_group: 4096,
            handshake_timeout_secs: 10,
            udp_receive_buffer_bytes: 8 << 20,
        }
    }
}

/// Counters for logs and benchmarks.
#[derive(Debug, Default)]
pub struct Stats {
    pub samples_stored: AtomicU64,
    pub duplicates_dropped: AtomicU64,
    pub batches: AtomicU64,
    pub refused_handshakes: AtomicU64,
    pub protocol_errors: AtomicU64,
}

impl Stats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
struct Shared {
    fleet: Mutex<Fleet>,
    connections: Mutex<HashMap<String, (u64, quinn::Connection)>>,
    writer: mpsc::Sender<writer::WriteRequest>,
    store: Arc<Store>,
    stats: Stats,
    next_connection_id: AtomicU64,
    next_order_id: AtomicU64,
    config: IngestConfig,
    /// Answers CLI job requests; unset in a coordinator without an executor (tests, benches).
    jobs: OnceLock<Arc<dyn JobService>>,
}

/// A running ingest server. Dropping it does not stop it; call [`Ingest::shutdown`].
#[derive(Debug)]
pub struct Ingest {
    shared: Arc<Shared>,
    endpoint: quinn::Endpoint,
    accept: JoinHandle<()>,
}

/// A cheap handle to ask the running server things and send orders.
#[derive(Debug, Clone)]
pub struct IngestHandle {
    shared: Arc<Shared>,
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Ingest {
    pub fn start(endpoint: quinn::Endpoint, store: Arc<Store>, config: IngestConfig) -> Self {
        let (tx, rx) = mpsc::channel(config.max_group.max(1) * 2);
        tokio::spawn(writer::run(store.clone(), rx, config.max_group.max(1)));
        let shared = Arc::new(Shared {
            fleet: Mutex::new(Fleet::new(config.window_secs * 1000)),
            connections: Mutex::new(HashMap::new()),
            writer: tx,
            store,
            stats: Stats::default(),
            next_connection_id: AtomicU64::new(1),
            // Order ids only need to be unique per coordinator run and agent; starting from the
            // clock keeps them unique across restarts too.
            next_order_id: AtomicU64::new(now_ms() * 1000),
            config,
            jobs: OnceLock::new(),
        });
        let accept = tokio::spawn(session::accept_loop(endpoint.clone(), shared.clone()));
        Self {
            shared,
            endpoint,
            accept,
        }
    }

    pub fn handle(&self) -> IngestHandle {
        IngestHandle {
            shared: self.shared.clone(),
        }
    }

    pub fn local_addr(&self) -> Result<std::net::SocketAddr> {
        self.endpoint.local_addr().map_err(|source| Error::Io {
            context: "QUIC endpoint address".into(),
            source,
        })
    }

    /// Stops accepting, closes every connection and waits (bounded) for the close to reach
    /// the peers.
    pub async fn shutdown(self) {
        self.accept.abort();
        self.endpoint.close(
            demeter_common::protocol::close_code::SHUTTING_DOWN.into(),
            b"coordinator shutting down",
        );
        let _ = tokio::time::timeout(Duration::from_secs(3), self.endpoint.wait_idle()).await;
    }
}

impl IngestHandle {
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.shared.store
    }

    pub fn summaries(&self) -> Vec<AgentSummary> {
        self.shared
            .fleet
            .lock()
            .map(|f| f.summaries())
            .unwrap_or_default()
    }

    /// Routes CLI job requests to `service` from now on; only the first call counts (the
    /// daemon has one executor).
    pub fn serve_jobs(&self, service: Arc<dyn JobService>) -> bool {
        self.shared.jobs.set(service).is_ok()
    }

    /// The newest samples of the TaskManager JVMs whose id starts with `prefix`.
    pub fn latest_jvms(&self, prefix: &str) -> Vec<demeter_common::metrics::JvmSample> {
        self.shared
            .fleet
            .lock()
            .map(|f| f.latest_jvms(prefix))
            .unwrap_or_default()
    }

    /// Every connected agent's newest sample, by agent name (placement of profiling copies).
    pub fn latest_samples(&self) -> Vec<(String, demeter_common::metrics::Sample)> {
        self.shared
            .fleet
            .lock()
            .map(|f| f.latest_samples())
            .unwrap_or_default()
    }

    pub fn connected_agents(&self) -> Vec<String> {
        self.shared
            .fleet
            .lock()
            .map(|f| f.connected_names())
            .unwrap_or_default()
    }

    /// Sends an order to an agent and waits for its result.
    pub async fn send_order(
        &self,
        agent: &str,
        kind: OrderKind,
        deadline: Duration,
    ) -> Result<OrderResult> {
        let id = self.shared.next_order_id.fetch_add(1, Ordering::Relaxed);
        let order = Order {
            id,
            deadline_ms: now_ms() + deadline.as_millis() as u64,
            kind,
        };
        self.resend_order(agent, order, deadline).await
    }

    /// Sends an order with a known id (a retry after a lost answer); the agent answers a
    /// repeated id with its first result instead of acting twice.
    pub async fn resend_order(
        &self,
        agent: &str,
        order: Order,
        timeout: Duration,
    ) -> Result<OrderResult> {
        let connection = self
            .shared
            .connections
            .lock()
            .ok()
            .and_then(|c| c.get(agent).map(|(_, conn)| conn.clone()))
            .ok_or_else(|| Error::AgentNotConnected {
                agent: agent.to_string(),
            })?;
        let exchange = async {
            let (mut send, mut recv) = connection
                .open_bi()
                .await
                .map_err(demeter_common::Error::from)?;
            transport::write_preamble(&mut send).await?;
            transport::write_frame(&mut send, &CoordinatorMessage::Order(order.clone())).await?;
            let _ = send.finish();
            transport::read_preamble(&mut recv).await?;
            match transport::expect_frame::<AgentMessage>(&mut recv).await? {
                AgentMessage::OrderResult(result) if result.order_id == order.id => Ok(result),
                other => Err(Error::Protocol(demeter_common::Error::UnexpectedMessage {
                    expected: "the order's result",
                    got: format!("{other:?}").chars().take(80).collect(),
                })),
            }
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| {
            Error::Protocol(demeter_common::Error::Stream(format!(
                "no answer to order {} within {timeout:?}",
                order.id
            )))
        })?
    }
}

//! The agent's connection to the coordinator: dial, say hello, stream sealed batches, apply
//! acknowledgements, answer orders; on any failure, back off and dial again. The outbox keeps
//! every unacknowledged sample across reconnects, so nothing taken during an outage is lost.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use demeter_common::protocol::{
    AgentMessage, Capability, CoordinatorMessage, Hello, MetricBatch, OrderKind, OrderOutcome,
    OrderResult,
};
use demeter_common::{Error, Result, transport};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::backoff::Backoff;
use crate::orders::{Admission, OrderBook};
use crate::outbox::Outbox;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub coordinator: SocketAddr,
    pub server_name: String,
    pub backoff: Backoff,
}

/// State the sampling loop and the connection share.
#[derive(Debug)]
pub struct Shared {
    pub outbox: Mutex<Outbox>,
    /// Bumped whenever a batch is sealed, so the sender wakes without polling.
    pub sealed: watch::Sender<u64>,
    pub orders: Mutex<OrderBook>,
}

impl Shared {
    pub fn new(outbox: Outbox, order_memory: usize) -> Arc<Self> {
        Arc::new(Self {
            outbox: Mutex::new(outbox),
            sealed: watch::channel(0).0,
            orders: Mutex::new(OrderBook::new(order_memory)),
        })
    }

    fn next_batch_after(&self, sent_up_to: u64) -> Option<MetricBatch> {
        self.outbox.lock().ok()?.next_after(sent_up_to).cloned()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Dials and serves forever; the caller aborts the task to stop.
pub async fn run(endpoint: quinn::Endpoint, config: ClientConfig, shared: Arc<Shared>) {
    let mut attempt = 0u32;
    loop {
        match session(&endpoint, &config, &shared, &mut attempt).await {
            Ok(()) => info!("connection closed"),
            Err(e) => {
                warn!(coordinator = %config.coordinator, error = %e, attempt, "connection failed")
            }
        }
        let delay = config.backoff.delay(attempt, rand::random::<f64>());
        attempt = attempt.saturating_add(1);
        debug!(?delay, "reconnecting after backoff");
        tokio::time::sleep(delay).await;
    }
}

async fn session(
    endpoint: &quinn::Endpoint,
    config: &ClientConfig,
    shared: &Arc<Shared>,
    attempt: &mut u32,
) -> Result<()> {
    let connecting = endpoint
        .connect(config.coordinator, &config.server_name)
        .map_err(|e| Error::Stream(format!("cannot dial: {e}")))?;
    let connection = connecting.await?;
    let (mut control, mut control_recv) = connection.open_bi().await?;
    let boot_id = shared.outbox.lock().map(|o| o.boot_id()).unwrap_or(0);
    transport::write_preamble(&mut control).await?;
    let hello = Hello {
        boot_id,
        software: format!("demeter-agent {}", env!("CARGO_PKG_VERSION")),
        capabilities: vec![Capability::Metrics, Capability::Ping],
    };
    transport::write_frame(&mut control, &AgentMessage::Hello(hello)).await?;
    // With TLS 1.3 a refused client certificate only shows here, on the first read.
    transport::read_preamble(&mut control_recv).await?;
    let welcome = match transport::expect_frame::<CoordinatorMessage>(&mut control_recv).await? {
        CoordinatorMessage::Welcome(w) => w,
        other => {
            return Err(Error::UnexpectedMessage {
                expected: "Welcome",
                got: format!("{other:?}").chars().take(80).collect(),
            });
        }
    };
    if let Ok(mut outbox) = shared.outbox.lock() {
        outbox.ack(welcome.stored_up_to);
    }
    *attempt = 0;
    info!(name = %welcome.peer_name, stored_up_to = welcome.stored_up_to, "connected to coordinator");

    let mut metrics = connection.open_uni().await?;
    transport::write_preamble(&mut metrics).await?;
    tokio::select! {
        r = send_batches(&mut metrics, shared, welcome.stored_up_to) => r,
        r = receive_acks(&mut control_recv, shared, boot_id) => r,
        r = serve_orders(&connection, shared) => r,
    }
}

async fn send_batches(
    stream: &mut quinn::SendStream,
    shared: &Shared,
    mut sent_up_to: u64,
) -> Result<()> {
    let mut sealed = shared.sealed.subscribe();
    loop {
        while let Some(batch) = shared.next_batch_after(sent_up_to) {
            transport::write_frame(stream, &AgentMessage::Metrics(batch.clone())).await?;
            sent_up_to = batch.last_seq();
        }
        sealed
            .changed()
            .await
            .map_err(|_| Error::StreamClosed("agent stopping"))?;
    }
}

async fn receive_acks(recv: &mut quinn::RecvStream, shared: &Shared, boot_id: u64) -> Result<()> {
    while let Some(msg) = transport::read_frame::<CoordinatorMessage>(recv).await? {
        match msg {
            CoordinatorMessage::Ack {
                boot_id: b,
                stored_up_to,
            } if b == boot_id => {
                if let Ok(mut outbox) = shared.outbox.lock() {
                    outbox.ack(stored_up_to);
                }
            }
            other => warn!(message = ?other, "ignoring unexpected message on the control stream"),
        }
    }
    Err(Error::StreamClosed("by the coordinator"))
}

async fn serve_orders(connection: &quinn::Connection, shared: &Arc<Shared>) -> Result<()> {
    loop {
        let (send, recv) = connection.accept_bi().await?;
        let shared = shared.clone();
        tokio::spawn(async move {
            if let Err(e) = answer_order(send, recv, &shared).await {
                warn!(error = %e, "order stream failed");
            }
        });
    }
}

async fn answer_order(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    shared: &Shared,
) -> Result<()> {
    transport::read_preamble(&mut recv).await?;
    let order = match transport::expect_frame::<CoordinatorMessage>(&mut recv).await? {
        CoordinatorMessage::Order(order) => order,
        other => {
            return Err(Error::UnexpectedMessage {
                expected: "Order",
                got: format!("{other:?}").chars().take(80).collect(),
            });
        }
    };
    let admission = shared
        .orders
        .lock()
        .map(|book| book.admit(&order, now_ms()))
        .unwrap_or(Admission::Execute);
    let result = match admission {
        Admission::Replay(result) | Admission::Expired(result) => result,
        Admission::Execute => {
            let outcome = execute(&order.kind).await;
            let result = OrderResult {
                order_id: order.id,
                outcome,
            };
            if let Ok(mut book) = shared.orders.lock() {
                book.complete(&result);
            }
            result
        }
    };
    debug!(order = order.id, outcome = ?result.outcome, "order answered");
    transport::write_preamble(&mut send).await?;
    transport::write_frame(&mut send, &AgentMessage::OrderResult(result)).await?;
    let _ = send.finish();
    Ok(())
}

async fn execute(kind: &OrderKind) -> OrderOutcome {
    match kind {
        OrderKind::Ping => OrderOutcome::Done,
        // This build advertises no TaskManagers capability; the supervisor answers these.
        OrderKind::StartTaskManager(_)
        | OrderKind::StopTaskManager { .. }
        | OrderKind::KillTaskManager { .. }
        | OrderKind::ListTaskManagers => OrderOutcome::Unsupported,
    }
}

/// Waits until every sample is acknowledged, or `grace` passes; returns whether it drained.
pub async fn drain(shared: &Shared, grace: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        if shared.outbox.lock().map(|o| o.is_drained()).unwrap_or(true) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

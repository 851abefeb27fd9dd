//! The agent's connection to the coordinator: dial, say hello, stream sealed batches, apply
//! acknowledgements, answer orders; on any failure, back off and dial again. The outbox keeps
//! every unacknowledged sample across reconnects, so nothing taken during an outage is lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use demeter_common::protocol::{
    AgentMessage, Capability, CoordinatorMessage, Hello, MetricBatch, Order, OrderKind,
    OrderOutcome, OrderResult, TaskManagerState, TaskManagerStatus,
};
use demeter_common::{Error, Result, transport};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::backoff::Backoff;
use crate::orders::{Admission, OrderBook};
use crate::outbox::Outbox;
use crate::supervisor::Supervisor;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port`, resolved at every dial.
    pub coordinator: String,
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
    /// Bumped when an order completes, so a resent copy waiting on it wakes.
    order_done: watch::Sender<u64>,
    /// Runs TaskManagers on order; without it those orders are `Unsupported`.
    pub supervisor: Option<Arc<Supervisor>>,
}

impl Shared {
    pub fn new(outbox: Outbox, order_memory: usize) -> Arc<Self> {
        Self::with_supervisor(outbox, order_memory, None)
    }

    pub fn with_supervisor(
        outbox: Outbox,
        order_memory: usize,
        supervisor: Option<Arc<Supervisor>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            outbox: Mutex::new(outbox),
            sealed: watch::channel(0).0,
            orders: Mutex::new(OrderBook::new(order_memory)),
            order_done: watch::channel(0).0,
            supervisor,
        })
    }

    fn capabilities(&self) -> Vec<Capability> {
        let mut capabilities = vec![Capability::Metrics, Capability::Ping];
        if self.supervisor.is_some() {
            capabilities.push(Capability::TaskManagers);
        }
        capabilities
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
    let addr = tokio::net::lookup_host(&config.coordinator)
        .await
        .map_err(|e| Error::Stream(format!("cannot resolve {}: {e}", config.coordinator)))?
        .next()
        .ok_or_else(|| Error::Stream(format!("{} resolves to no address", config.coordinator)))?;
    let connecting = endpoint
        .connect(addr, &config.server_name)
        .map_err(|e| Error::Stream(format!("cannot dial: {e}")))?;
    let connection = connecting.await?;
    let (mut control, mut control_recv) = connection.open_bi().await?;
    let boot_id = shared.outbox.lock().map(|o| o.boot_id()).unwrap_or(0);
    transport::write_preamble(&mut control).await?;
    let hello = Hello {
        boot_id,
        software: format!("demeter-agent {}", env!("CARGO_PKG_VERSION")),
        capabilities: shared.capabilities(),
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
    let result = admit_and_execute(&order, shared).await;
    debug!(order = order.id, outcome = ?result.outcome, "order answered");
    transport::write_preamble(&mut send).await?;
    transport::write_frame(&mut send, &AgentMessage::OrderResult(result)).await?;
    let _ = send.finish();
    Ok(())
}

/// Longest a resent copy waits for the first copy of its order to finish.
const DUPLICATE_WAIT: Duration = Duration::from_secs(180);

async fn admit_and_execute(order: &Order, shared: &Shared) -> OrderResult {
    let mut done = shared.order_done.subscribe();
    let waited_since = tokio::time::Instant::now();
    loop {
        let admission = shared
            .orders
            .lock()
            .map(|mut book| book.admit(order, now_ms()))
            .unwrap_or(Admission::Execute);
        match admission {
            Admission::Replay(result) | Admission::Expired(result) => return result,
            Admission::Execute => break,
            Admission::InProgress => {
                let left = DUPLICATE_WAIT.saturating_sub(waited_since.elapsed());
                if left.is_zero() || tokio::time::timeout(left, done.changed()).await.is_err() {
                    return OrderResult {
                        order_id: order.id,
                        outcome: OrderOutcome::Failed(
                            "the first copy of this order is still running".into(),
                        ),
                    };
                }
            }
        }
    }
    let result = OrderResult {
        order_id: order.id,
        outcome: execute(&order.kind, shared.supervisor.as_deref()).await,
    };
    if let Ok(mut book) = shared.orders.lock() {
        book.complete(&result);
    }
    shared.order_done.send_modify(|n| *n += 1);
    result
}

/// Runs one order. TaskManager orders answer with the TaskManagers' states afterwards, or
/// `Failed` when the TaskManager could not be started or the request was refused.
pub async fn execute(kind: &OrderKind, supervisor: Option<&Supervisor>) -> OrderOutcome {
    let supervisor = match (kind, supervisor) {
        (OrderKind::Ping, _) => return OrderOutcome::Done,
        (_, None) => return OrderOutcome::Unsupported,
        (_, Some(s)) => s,
    };
    let done = match kind {
        OrderKind::Ping => Ok(None),
        OrderKind::StartTaskManager(spec) => {
            supervisor.start_task_manager(spec.clone()).await.map(Some)
        }
        OrderKind::StopTaskManager { id } => supervisor.stop_task_manager(id).await.map(|_| None),
        OrderKind::KillTaskManager { id } => supervisor.kill_task_manager(id).await.map(|_| None),
        OrderKind::ListTaskManagers => Ok(None),
    };
    match done {
        Ok(Some(TaskManagerStatus {
            spec,
            state: TaskManagerState::Failed(reason),
            ..
        })) => OrderOutcome::Failed(format!("TaskManager {}: {reason}", spec.id)),
        Ok(_) => match supervisor.list() {
            Ok(list) => OrderOutcome::TaskManagers(list),
            Err(e) => OrderOutcome::Failed(e.to_string()),
        },
        Err(e) => OrderOutcome::Failed(e.to_string()),
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

//! Group commit: sessions hand their batches to one writer task, which stores everything that
//! queued up meanwhile in a single durable transaction and answers each session.

use std::sync::Arc;

use demeter_common::protocol::MetricBatch;
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::store::{Appended, Store};

#[derive(Debug)]
pub struct WriteRequest {
    pub agent: Arc<str>,
    pub batch: MetricBatch,
    pub reply: oneshot::Sender<Result<Appended>>,
}

/// Runs until every sender is gone.
pub async fn run(store: Arc<Store>, mut requests: mpsc::Receiver<WriteRequest>, max_group: usize) {
    while let Some(first) = requests.recv().await {
        let mut group = vec![first];
        while group.len() < max_group {
            match requests.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        let store = store.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let refs: Vec<(&str, &MetricBatch)> =
                group.iter().map(|r| (&*r.agent, &r.batch)).collect();
            let outcome = store.append(&refs);
            (group, outcome)
        })
        .await;
        let (group, outcome) = match joined {
            Ok(done) => done,
            Err(e) => {
                tracing::error!(error = %e, "store writer task failed; batches stay unacknowledged");
                continue;
            }
        };
        match outcome {
            Ok(results) => {
                for (request, appended) in group.into_iter().zip(results) {
                    let _ = request.reply.send(Ok(appended));
                }
            }
            Err(e) => {
                // Nothing was committed: the agents keep the batches and resend them.
                tracing::error!(error = %e, batches = group.len(), "group commit failed");
                let message = e.to_string();
                for request in group {
                    let _ = request.reply.send(Err(Error::Store(message.clone())));
                }
            }
        }
    }
}

//! The daemon's driver observer: routes each journaled record of a job's operation to the CLI
//! that asked for it (as progress events), then to the next observer (the failpoints).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use demeter_common::protocol::JobReply;
use tokio::sync::mpsc;

use super::super::driver::Observer;
use super::super::effects::Effect;
use super::super::operation::{Operation, Step};
use super::wire::Progress;

#[derive(Debug)]
struct Subscriber {
    replies: mpsc::Sender<JobReply>,
    progress: Progress,
}

pub struct Hub {
    next: Arc<dyn Observer>,
    subscribers: Mutex<HashMap<String, Subscriber>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    pub fn new(next: Arc<dyn Observer>) -> Self {
        Self {
            next,
            subscribers: Mutex::new(HashMap::new()),
        }
    }

    /// Progress of `job`'s next operation goes to `replies`.
    pub fn subscribe(&self, job: &str, replies: mpsc::Sender<JobReply>) {
        if let Ok(mut subs) = self.subscribers.lock() {
            let progress = Progress::default();
            subs.insert(job.to_string(), Subscriber { replies, progress });
        }
    }

    /// Stops sending; whether an operation had started (its `Started` was sent).
    pub fn unsubscribe(&self, job: &str) -> bool {
        self.subscribers
            .lock()
            .ok()
            .and_then(|mut subs| subs.remove(job))
            .is_some_and(|s| s.progress.started())
    }
}

impl Observer for Hub {
    fn journaled(&self, op: &Operation, finished: Option<Step>) {
        if let Ok(mut subs) = self.subscribers.lock()
            && let Some(sub) = subs.get_mut(&op.job)
        {
            for event in sub.progress.events(op, finished) {
                // A CLI that reads too slowly (or left) misses lines, never slows the
                // operation; `job show` has the whole history.
                let _ = sub.replies.try_send(event);
            }
        }
        self.next.journaled(op, finished);
    }

    fn effect_done(&self, op: &Operation, effect: &Effect) {
        self.next.effect_done(op, effect);
    }

    fn alert(&self, op: &Operation, message: &str) {
        self.next.alert(op, message);
    }
}

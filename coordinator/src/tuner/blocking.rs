//! The policy's decisions are CPU work of milliseconds, and of seconds when its surrogate is
//! refitted (hyperparameters by marginal likelihood). Run inline on a worker of the daemon's
//! multi-threaded runtime, a refit held that worker — and the QUIC sessions, the executor and the
//! other jobs' shells queued on it — for as long.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `decide` on this thread after handing the worker's other tasks to another worker
/// (`block_in_place`); inline where that cannot be done (outside a runtime, or on a
/// current-thread runtime, which has no other worker to hand them to).
pub fn off_the_workers<R>(decide: impl FnOnce() -> R) -> R {
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(decide),
        _ => decide(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    /// On a runtime with a single worker, a task spawned beside a long decision still runs
    /// while the decision holds the thread.
    #[test]
    fn other_tasks_run_while_a_decision_holds_the_thread() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        let ticks = runtime.block_on(async {
            let ticks = Arc::new(AtomicU64::new(0));
            let counter = Arc::clone(&ticks);
            let ticker = tokio::spawn(async move {
                loop {
                    counter.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
            // Lets the ticker start on the one worker before the decision takes it.
            tokio::task::yield_now().await;
            let during = tokio::spawn({
                let ticks = Arc::clone(&ticks);
                async move {
                    off_the_workers(|| {
                        let before = ticks.load(Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(500));
                        ticks.load(Ordering::Relaxed) - before
                    })
                }
            })
            .await
            .unwrap();
            ticker.abort();
            during
        });
        assert!(ticks > 0, "the other task stood still during the decision");
    }

    #[test]
    fn outside_a_multi_threaded_runtime_it_runs_inline() {
        assert_eq!(off_the_workers(|| 7), 7);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(runtime.block_on(async { off_the_workers(|| 8) }), 8);
    }
}

//! Checks and measurements the real-Flink tests share: a monitor of whether a job is fully
//! running (for downtime figures), the "no stop without a savepoint" check over every job
//! Flink knows, and the final stop-with-savepoint with the exactly-once check of the output.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use demeter_common::protocol::TaskManagerSpec;
use demeter_coordinator::executor::driver::now_ms;
use demeter_coordinator::flink::{FlinkClient, JobId, JobState, SavepointFormat, StopRequest};

/// Samples every 200 ms whether some job is fully running.
#[derive(Debug, Clone)]
pub struct UpMonitor {
    /// (ms since epoch, a job fully running).
    samples: Arc<Mutex<Vec<(u64, bool)>>>,
}

impl UpMonitor {
    /// Starts sampling in a tokio task (lives as long as the runtime).
    pub fn start(client: Arc<FlinkClient>) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(sample(client, samples.clone()));
        Self { samples }
    }

    /// The longest time between `from` and `to` when no job was fully running, in ms.
    pub fn longest_down(&self, from: u64, to: u64) -> u64 {
        let samples = self.samples.lock().unwrap();
        let (mut longest, mut down_since) = (0, None);
        for &(t, up) in samples.iter().filter(|(t, _)| (from..=to).contains(t)) {
            match (up, down_since) {
                (false, None) => down_since = Some(t),
                (true, Some(since)) => {
                    longest = longest.max(t - since);
                    down_since = None;
                }
                _ => {}
            }
        }
        longest
    }
}

async fn sample(client: Arc<FlinkClient>, samples: Arc<Mutex<Vec<(u64, bool)>>>) {
    loop {
        let mut running = false;
        if let Ok(jobs) = client.jobs_overview().await {
            for job in jobs.iter().filter(|j| j.state == JobState::Running) {
                if client
                    .job_details(&job.jid)
                    .await
                    .is_ok_and(|d| d.is_fully_running())
                {
                    running = true;
                }
            }
        }
        samples.lock().unwrap().push((now_ms(), running));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Exactly one job runs; every job that ended FINISHED did so with a completed savepoint;
/// none failed, and none was cancelled except those in `cancelled_on_purpose`.
pub async fn assert_one_running_and_every_stop_saved(
    client: &FlinkClient,
    context: &str,
    cancelled_on_purpose: &[JobId],
) {
    let jobs = client.jobs_overview().await.unwrap();
    let running: Vec<_> = jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .collect();
    assert_eq!(running.len(), 1, "{context}: {jobs:?}");
    for job in &jobs {
        match job.state {
            JobState::Finished => {
                let stats = client.checkpoint_stats(&job.jid).await.unwrap();
                let saved = stats
                    .latest
                    .savepoint
                    .is_some_and(|s| s.status == "COMPLETED");
                assert!(
                    saved,
                    "{context}: {} FINISHED without a completed savepoint",
                    job.jid
                );
            }
            JobState::Canceled if cancelled_on_purpose.contains(&job.jid) => {}
            JobState::Canceled | JobState::Failed => {
                panic!("{context}: job {} ended {:?}", job.jid, job.state)
            }
            _ => {}
        }
    }
}

/// Stops `job` with a savepoint, then runs `scripts/check-exactly-once.py` over the job's
/// committed output in `out`; returns the number of records it proved.
pub async fn stop_and_check_exactly_once(
    client: &FlinkClient,
    job: &JobId,
    repo: &Path,
    out: &Path,
) -> u64 {
    let request = StopRequest {
        target_directory: None,
        drain: false,
        format: Some(SavepointFormat::Canonical),
    };
    let trigger = client.stop_with_savepoint(job, &request).await.unwrap();
    client
        .wait_savepoint(
            job,
            &trigger,
            Duration::from_secs(60),
            Duration::from_millis(200),
        )
        .await
        .unwrap();
    let check = std::process::Command::new("python3")
        .arg(repo.join("scripts/check-exactly-once.py"))
        .arg(out)
        .args(["--splits", "1", "--min-records", "1000"])
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "exactly-once check failed: {summary}"
    );
    let value: serde_json::Value = serde_json::from_str(&summary).unwrap();
    value["records"].as_u64().unwrap()
}

/// Flink lists exactly these TaskManagers (id, slots, process memory).
pub async fn assert_registered_taskmanagers(client: &FlinkClient, specs: &[TaskManagerSpec]) {
    let mut want: Vec<_> = specs
        .iter()
        .map(|s| (s.id.clone(), s.slots, u64::from(s.process_memory_mb)))
        .collect();
    want.sort();
    let mut got: Vec<_> = client
        .taskmanagers()
        .await
        .unwrap()
        .into_iter()
        .map(|t| {
            let mb = t
                .memory_configuration
                .map_or(0, |m| m.total_process_memory >> 20);
            (t.id.0, t.slots_number, mb)
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "registered TaskManagers");
}

//! The Flink REST client against a real Flink 2.3 cluster: overview, jar upload and run,
//! metrics, savepoint, stop-with-savepoint, run from the savepoint with another parallelism and a
//! per-job checkpoint interval, resource requirements, cancel.
//!
//! Runs only when `DEMETER_FLINK_REST` names the cluster (e.g. `http://127.0.0.1:8081`); otherwise
//! it prints why and passes. The job jar is `DEMETER_FLINK_JOB_JAR` (entry class
//! `DEMETER_FLINK_JOB_ENTRY`, default the tiny test job), or, if unset, the tiny job in
//! `testdata/flink/job` built with javac against `$FLINK_HOME/lib/flink-dist-2.3.0.jar`.
//! Savepoints go to `DEMETER_FLINK_SAVEPOINT_DIR` or the cluster's configured savepoint dir.
//! Needs ≥ 2 free slots; the resource-requirements step needs `jobmanager.scheduler: adaptive`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use demeter_coordinator::flink::{
    ClientConfig, FlinkClient, JarRunRequest, JobDetails, JobId, JobState, ParallelismBounds,
    SavepointFormat, SavepointRequest, StopRequest,
};
use demeter_coordinator::{Error, FlinkErrorKind};

const TINY_JOB_ENTRY: &str = "demeter.testjob.TinyJob";
const SAVEPOINT_DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

#[tokio::test]
async fn real_flink_lifecycle() {
    let Ok(rest) = std::env::var("DEMETER_FLINK_REST") else {
        println!(
            "SKIPPED real_flink_lifecycle: DEMETER_FLINK_REST is not set (no Flink cluster to test against)"
        );
        return;
    };
    let jar = match job_jar() {
        Ok(jar) => jar,
        Err(reason) => {
            println!("SKIPPED real_flink_lifecycle: {reason}");
            return;
        }
    };
    let client = Arc::new(FlinkClient::new(&rest, ClientConfig::default()).expect("client"));
    let started = Arc::new(Mutex::new(Vec::new()));
    // In a task so that a failed assertion, too, reaches the clean-up below.
    let outcome = tokio::spawn({
        let (client, started) = (client.clone(), started.clone());
        async move { lifecycle(&client, &jar, &started).await }
    })
    .await;
    let started = started.lock().unwrap().clone();
    for job in &started {
        // Leave no job running on the shared cluster, whatever happened above; cancelling a
        // finished job only yields an error, ignored here.
        let _ = client.cancel_job(job).await;
    }
    match outcome {
        Ok(result) => result.expect("lifecycle against real Flink"),
        Err(panicked) => std::panic::resume_unwind(panicked.into_panic()),
    }
}

fn job_jar() -> Result<PathBuf, String> {
    if let Ok(jar) = std::env::var("DEMETER_FLINK_JOB_JAR") {
        return Ok(PathBuf::from(jar));
    }
    let flink_home = std::env::var("FLINK_HOME")
        .map_err(|_| "neither DEMETER_FLINK_JOB_JAR nor FLINK_HOME is set to build the test job")?;
    let out = std::env::temp_dir().join(format!("demeter-tiny-job-{}.jar", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/flink/job/build.sh");
    let status = std::process::Command::new("bash")
        .args([script, &flink_home, &out.to_string_lossy()])
        .status()
        .map_err(|e| format!("running {script}: {e}"))?;
    if !status.success() {
        return Err(format!("{script} failed: {status}"));
    }
    Ok(out)
}

async fn lifecycle(
    client: &FlinkClient,
    jar: &std::path::Path,
    started: &Mutex<Vec<JobId>>,
) -> Result<(), Error> {
    let overview = client.overview().await?;
    let config = client.dashboard_config().await?;
    println!(
        "cluster: Flink {} ({}), {} TMs, {}/{} slots free",
        overview.flink_version,
        config.flink_revision,
        overview.taskmanagers,
        overview.slots_available,
        overview.slots_total
    );
    assert!(
        overview.flink_version.starts_with("2."),
        "{}",
        overview.flink_version
    );
    assert!(overview.slots_available >= 2, "the test needs 2 free slots");
    // The lab script bounds web.timeout (metrics must not freeze for 10 min after a TaskManager
    // stops answering) and sets a 1-s metric fetcher; the daemon reads the same endpoint and
    // warns when a cluster does not.
    let jm_config = client.jobmanager_config().await?;
    println!(
        "jobmanager config: web.timeout = {:?}",
        jm_config.get("web.timeout")
    );
    assert_eq!(
        jm_config.findings(),
        vec![],
        "the lab cluster's configuration"
    );

    let jar_id = client.upload_jar(jar).await?;
    assert!(client.list_jars().await?.iter().any(|j| j.id == jar_id));
    let entry = std::env::var("DEMETER_FLINK_JOB_ENTRY").unwrap_or_else(|_| TINY_JOB_ENTRY.into());
    let run = |parallelism, savepoint_path: Option<String>, interval: &str| JarRunRequest {
        entry_class: Some(entry.clone()),
        program_args_list: vec!["--rate".into(), "200".into()],
        parallelism: Some(parallelism),
        savepoint_path,
        allow_non_restored_state: Some(false),
        flink_configuration: [("execution.checkpointing.interval".into(), interval.into())].into(),
        job_id: None,
    };

    let t = Instant::now();
    let job = client.run_jar(&jar_id, &run(1, None, "3 s")).await?;
    started.lock().unwrap().push(job.clone());
    let details = wait_job(client, &job, |d| d.is_fully_running()).await?;
    println!("job {job} RUNNING after {:?}", t.elapsed());
    assert_eq!(details.vertices.len(), 2);
    assert_eq!(details.source_vertices().len(), 1);

    let tms = client.taskmanagers().await?;
    let tm_jvm = client.taskmanager_jvm(&tms[0].id).await?;
    let jm_jvm = client.jobmanager_jvm().await?;
    println!("TM {} JVM {tm_jvm:?}; JM JVM {jm_jvm:?}", tms[0].id);
    assert!(tm_jvm.heap_max_bytes.is_some_and(|b| b > 0.0));
    assert!(tm_jvm.young_gc_count.is_some(), "G1 young GC metric name");
    assert!(jm_jvm.heap_used_bytes.is_some_and(|b| b > 0.0));

    // The 60-s meters start near zero; wait until the source rate shows.
    let deadline = Instant::now() + Duration::from_secs(60);
    let snapshot = loop {
        let s = client
            .job_metrics_snapshot(&job, Duration::from_millis(1500))
            .await?;
        if s.input_rate.is_some_and(|r| r > 0.0) || Instant::now() > deadline {
            break s;
        }
    };
    println!("snapshot: {snapshot:?}");
    assert!(
        snapshot.input_rate.is_some_and(|r| r > 0.0),
        "no input rate within 60 s"
    );
    assert_eq!(snapshot.num_restarts, Some(0.0));
    assert!(
        snapshot
            .vertices
            .iter()
            .any(|v| v.is_source && v.records_out_per_second.is_some())
    );

    let target_directory = std::env::var("DEMETER_FLINK_SAVEPOINT_DIR").ok();
    let sp_request = SavepointRequest {
        target_directory: target_directory.clone(),
        format: Some(SavepointFormat::Canonical),
    };
    let t = Instant::now();
    let trigger = client.trigger_savepoint(&job, &sp_request).await?;
    let savepoint = client
        .wait_savepoint(&job, &trigger, SAVEPOINT_DEADLINE, POLL)
        .await?;
    println!("savepoint {savepoint} in {:?}", t.elapsed());

    // /proc is unwritable even for root: Flink must report the failure, and we must type it.
    let bad = SavepointRequest {
        target_directory: Some("file:///proc/demeter-nope".into()),
        format: None,
    };
    let trigger = client.trigger_savepoint(&job, &bad).await?;
    match client
        .wait_savepoint(&job, &trigger, SAVEPOINT_DEADLINE, POLL)
        .await
    {
        Err(Error::Flink {
            kind: FlinkErrorKind::SavepointFailed { root_cause, .. },
            ..
        }) => {
            println!("failed savepoint reported as: {root_cause}");
        }
        other => panic!("expected SavepointFailed, got {other:?}"),
    }

    let t = Instant::now();
    let stop = StopRequest {
        target_directory,
        drain: false,
        format: Some(SavepointFormat::Canonical),
    };
    let trigger = client.stop_with_savepoint(&job, &stop).await?;
    let stop_savepoint = client
        .wait_savepoint(&job, &trigger, SAVEPOINT_DEADLINE, POLL)
        .await?;
    wait_job(client, &job, |d| d.state == JobState::Finished).await?;
    println!(
        "stop-with-savepoint {stop_savepoint}, FINISHED after {:?}",
        t.elapsed()
    );

    let rescaled = client
        .run_jar(&jar_id, &run(2, Some(stop_savepoint.clone()), "2 s"))
        .await?;
    started.lock().unwrap().push(rescaled.clone());
    let details = wait_job(client, &rescaled, |d| d.is_fully_running()).await?;
    println!(
        "restored job {rescaled} RUNNING {:?} after the stop request",
        t.elapsed()
    );
    assert!(details.vertices.iter().all(|v| v.parallelism == 2));
    assert_eq!(client.checkpoint_config(&rescaled).await?.interval, 2000);
    let restored = client.checkpoint_stats(&rescaled).await?.latest.restored;
    let restored = restored.expect("restored from the savepoint");
    assert!(restored.is_savepoint);
    assert_eq!(
        restored.external_path.as_deref(),
        Some(stop_savepoint.as_str())
    );

    if details.scheduler_type.as_deref() == Some("Adaptive") {
        let mut requirements = client.resource_requirements(&rescaled).await?;
        for r in requirements.values_mut() {
            r.parallelism = ParallelismBounds {
                lower_bound: 1,
                upper_bound: 1,
            };
        }
        client
            .set_resource_requirements(&rescaled, &requirements)
            .await?;
        let read_back = client.resource_requirements(&rescaled).await?;
        assert_eq!(read_back, requirements);
    } else {
        println!(
            "resource-requirements step skipped: scheduler is {:?}",
            details.scheduler_type
        );
    }

    let t = Instant::now();
    client.cancel_job(&rescaled).await?;
    wait_job(client, &rescaled, |d| d.state == JobState::Canceled).await?;
    println!("cancel → CANCELED in {:?}", t.elapsed());

    let missing = client
        .job_details(&JobId::from("00000000000000000000000000000000"))
        .await;
    assert!(matches!(
        missing,
        Err(Error::Flink {
            kind: FlinkErrorKind::JobNotFound { .. },
            ..
        })
    ));
    client.delete_jar(&jar_id).await?;
    Ok(())
}

/// Polls the job every 200 ms until `done` holds (60 s at most).
async fn wait_job(
    client: &FlinkClient,
    job: &JobId,
    done: impl Fn(&JobDetails) -> bool,
) -> Result<JobDetails, Error> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let details = client.job_details(job).await?;
        if done(&details) {
            return Ok(details);
        }
        assert!(
            Instant::now() < deadline,
            "job {job} stuck in {:?}",
            details.state
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

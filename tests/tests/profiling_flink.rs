//! Profiling copies on real Flink 2.3 beside a production cluster: production (JobManager +
//! one TaskManager from `scripts/flink-lab.sh`) runs the benchmark job with its exactly-once
//! FileSink. One profiling batch of two candidates (different slots and memory) runs at a
//! CPU-bound rate (`--work-us`), with short warm-up and measurement windows, its copies'
//! TaskManagers run by ONE real `demeter-agent` (child backend) through `AgentHost`: the
//! agent knows only production's cluster paths, and the copies' TaskManagers join their own
//! JobManagers (on this host) through dynamic properties; usage comes from the agent's
//! samples, the recovery kill is the agent's `KillTaskManager`. Beside it a second batch runs
//! through the real `demeter-coordinator profile` CLI with copies on this host, under a cap
//! with room for one of its two copies (the other is reported skipped), and is recalled
//! (Ctrl-C raises the recall flag) once its job runs. Checks: both measured copies yield
//! plausible observations, the higher-capacity one is less busy at the same rate, the agent
//! ran the measured copies' TaskManagers (production's cluster name, the copy's JobManager
//! port) and runs none after, the recalled copy reports aborted, nothing of either batch is
//! left (JVMs, ports, directories), copy state never reached production's checkpoint
//! directory, and production is unaffected (same job RUNNING, never restarted, exactly-once
//! output intact). Prints start-up, measurement, tear-down, recovery and batch wall times.
//!
//! Runs only when `DEMETER_LAB` names an installed lab. Ports: production REST/RPC
//! `DEMETER_PROFILING_PROD_REST_PORT` (18491) / `DEMETER_PROFILING_PROD_RPC_PORT` (16491);
//! copies `DEMETER_PROFILING_REST_PORTS` (18500-18519) / `DEMETER_PROFILING_RPC_PORTS`
//! (16500-16519); the agent's QUIC port is any free one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

#[path = "profiling_flink/agent_rig.rs"]
mod agent_rig;

use std::sync::Arc;

use agent_rig::{AGENT, AgentRig, PhaseLog};
use demeter_common::protocol::TaskManagerState;
use demeter_coordinator::flink::{
    ClientConfig, FlinkClient, JarRunRequest, JobId, JobState, SavepointFormat, StopRequest,
};
use demeter_coordinator::models::space::JobConfig;
use demeter_coordinator::profiler::agent_host::AgentHost;
use demeter_coordinator::profiler::batch::{BatchRequest, Recall, Runtime, run_batch};
use demeter_coordinator::profiler::host::{port_free, processes_naming};
use demeter_coordinator::profiler::plan::loopback;
use demeter_coordinator::profiler::{Layout, PortRange, Resources, Times};
use demeter_tests::lab::Lab;
use demeter_tests::{Scratch, binary};

/// The agent's name for the production cluster's paths; copies start from them.
const AGENT_CLUSTER: &str = "prod";

const ENTRY: &str = "io.demeter.bench.BenchJob";
/// Records/s fed to each copy; with `--work-us 1000` a window subtask is ~40 % busy at 400/s.
const RATE: f64 = 400.0;
const LOW: &str = "p=1,slots=1,mem=1024m,cpu=1,ckpt=5s";
const HIGH: &str = "p=2,slots=2,mem=1280m,cpu=1,ckpt=5s";

fn env_or(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiling_batch_beside_production_on_real_flink() {
    let lab = match Lab::from_env() {
        Ok(lab) => lab,
        Err(reason) => {
            println!("SKIPPED profiling_batch_beside_production_on_real_flink: {reason}");
            return;
        }
    };
    let rest: u16 = env_or("DEMETER_PROFILING_PROD_REST_PORT", "18491")
        .parse()
        .unwrap();
    let rpc: u16 = env_or("DEMETER_PROFILING_PROD_RPC_PORT", "16491")
        .parse()
        .unwrap();
    let rest_ports = env_or("DEMETER_PROFILING_REST_PORTS", "18500-18519");
    let rpc_ports = env_or("DEMETER_PROFILING_RPC_PORTS", "16500-16519");
    let jar = lab.bench_jar();
    let scratch = Scratch::new("profiling-flink");
    let out = scratch.path.join("production-output");
    let work = scratch.path.join("profiling");

    let cluster = lab.start_with("prof", rest, rpc, &["--taskmanagers", "1", "--slots", "2"]);
    let client =
        FlinkClient::new(&format!("http://127.0.0.1:{rest}"), ClientConfig::default()).unwrap();
    let job = start_production(&client, &jar, &out).await;
    let rig = AgentRig::start(AGENT_CLUSTER, &cluster.env).await;
    // Job directories there from earlier runs (retained checkpoints survive a cancel).
    let prod_checkpoints = lab.dir.join("clusters/prof/checkpoints");
    let checkpoints_before = job_dirs(&prod_checkpoints);

    // Two batches at once on split port ranges: the measured one, and one that is recalled
    // (Ctrl-C, what production's recall does) once its job runs.
    let (main_rest, recalled_rest) = split(&rest_ports);
    let (main_rpc, recalled_rpc) = split(&rpc_ports);
    let recalled_work = scratch.path.join("profiling-recalled");
    let recalled = tokio::spawn(run_and_recall(
        jar.clone(),
        cluster.env["FLINK_HOME"].clone(),
        recalled_rest,
        recalled_rpc,
        recalled_work.clone(),
    ));
    // The measured batch: its copies' TaskManagers run through the agent, placed by memory
    // (this shared 2-core machine's idle CPU says little; the placement tests cover CPU).
    let host = Arc::new(AgentHost::new(
        rig.handle(),
        AGENT_CLUSTER.into(),
        vec![AGENT.into()],
        Resources {
            cpu_cores: 0.0,
            memory_mb: 512.0,
        },
        false,
    ));
    let runtime = Arc::new(Runtime {
        flink_home: PathBuf::from(&cluster.env["FLINK_HOME"]),
        jar: jar.clone(),
        entry_class: ENTRY.into(),
        latency_metric: "window.latencyP95Ms".into(),
        times: Times {
            warmup_ms: 20_000,
            measure_ms: 20_000,
            max_recovery_ms: 90_000,
            ..Times::default()
        },
        host,
        client: ClientConfig::default(),
    });
    let layout = Layout {
        rest_ports: range(&main_rest),
        rpc_ports: range(&main_rpc),
        root: work.clone(),
        jm_memory_mb: 640,
        jm_cpu_cores: 0.25,
        cap: Resources {
            cpu_cores: 3.0,
            memory_mb: 5120.0,
        },
        jobmanager_address: loopback(),
    };
    let request = BatchRequest {
        batch: 1,
        candidates: vec![LOW.parse().unwrap(), HIGH.parse().unwrap()],
        rate: RATE,
        template: "--rate {rate} --sink discard --work-us 1000".into(),
    };
    let phases = Arc::new(PhaseLog::default());
    let started = std::time::Instant::now();
    let report = run_batch(
        runtime,
        &layout,
        &request,
        Resources::default(),
        &Recall::default(),
        phases.clone(),
    )
    .await
    .unwrap();
    let batch_s = started.elapsed().as_secs_f64();

    // Both copies measured, with plausible numbers.
    let obs = report.observations();
    assert_eq!(
        obs.len(),
        2,
        "{report:?}\nlogs of failed copies: {:?}; the agent's TaskManagers log to {}",
        std::fs::read_dir(work.join("failed"))
            .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default(),
        cluster.env["FLINK_LOG_DIR"]
    );
    let find = |text: &str| {
        let config = text.parse().unwrap();
        *obs.iter().find(|o| o.config == config).expect(text)
    };
    let (low, high) = (find(LOW), find(HIGH));
    for o in [low, high] {
        let busy = o.busy_fraction.expect("busy fraction");
        assert!(busy > 0.0 && busy <= 1.0, "{o:?}");
        assert!(o.latency_p95_ms > 0.0, "{o:?}");
        assert!(o.recovery_s.is_some_and(|r| r > 0.0), "{o:?}");
        assert!(o.cpu_cores > 0.0 && o.memory_mb > 0.0, "{o:?}");
        assert!(
            (o.rate - RATE).abs() < 120.0,
            "rate near the ordered one: {o:?}"
        );
    }
    assert!(
        high.busy_fraction.unwrap() < low.busy_fraction.unwrap(),
        "two window subtasks must be less busy than one at the same rate: {low:?} vs {high:?}"
    );

    let recalled_after_s = recalled.await.unwrap();

    // The agent ran the copies' TaskManagers, on production's conf dir plus the copy's
    // JobManager port as a property, and none runs any more.
    let agent_tms = rig.taskmanagers().await;
    for copy in &report.copies {
        let mine: Vec<_> = agent_tms
            .iter()
            .filter(|s| s.spec.id.starts_with(&format!("{}-tm", copy.name)))
            .collect();
        assert!(
            !mine.is_empty(),
            "{} not run by the agent: {agent_tms:?}",
            copy.name
        );
        for s in mine {
            assert_eq!(s.spec.cluster, AGENT_CLUSTER);
            let port = s
                .spec
                .properties
                .iter()
                .find(|(k, _)| k == "jobmanager.rpc.port")
                .map(|(_, v)| v.parse::<u16>().unwrap())
                .unwrap();
            assert!(layout.rpc_ports.contains(port), "{s:?}");
            assert!(
                !matches!(
                    s.state,
                    TaskManagerState::Running | TaskManagerState::Starting
                ),
                "{s:?}"
            );
        }
    }
    // Copy state never went to production's checkpoint directory.
    let mut expected = checkpoints_before;
    expected.insert(job.to_string());
    let after = job_dirs(&prod_checkpoints);
    assert!(
        after.is_subset(&expected),
        "job directories in production's checkpoint dir beyond production's: {after:?}"
    );

    // Nothing of either batch is left.
    for dir in [&work, &recalled_work] {
        assert_eq!(
            processes_naming(dir),
            Vec::<u32>::new(),
            "processes of the copies"
        );
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "copy directories left: {left:?}");
    }
    for range in [&rest_ports, &rpc_ports] {
        let (a, b) = bounds(range);
        for port in a..=b {
            assert!(port_free(port), "port {port} still bound");
        }
    }

    // Production did not notice.
    let details = client.job_details(&job).await.unwrap();
    assert_eq!(details.state, JobState::Running);
    let restarts = client.job_metrics(&job, &["numRestarts"]).await.unwrap();
    assert_eq!(
        restarts.number("numRestarts"),
        Some(0.0),
        "production restarted"
    );
    let records = stop_and_check(&client, &job, &lab.repo, &out).await;

    println!("FIGURES");
    println!("  batch wall time (plan → all copies torn down): {batch_s:.1} s");
    for copy in &report.copies {
        let (start, measure, teardown) = phases.durations(copy);
        println!(
            "  {} on the agent: start {start:.1} s (provision → warming up), measure {measure:.1} s, \
             tear-down {teardown:.1} s",
            copy.name
        );
    }
    for (name, o) in [("low", low), ("high", high)] {
        println!(
            "  {name} {}: busy {:.3}, p95 {:.0} ms, recovery {:.1} s, cpu {:.2} cores, rss {:.0} MiB",
            o.config,
            o.busy_fraction.unwrap(),
            o.latency_p95_ms,
            o.recovery_s.unwrap(),
            o.cpu_cores,
            o.memory_mb
        );
    }
    println!("  recalled copy: Ctrl-C → torn down, CLI exited after {recalled_after_s:.1} s");
    println!("  production exactly-once: {records} records, none lost or duplicated");
    drop(cluster);
}

/// The job-id directories under a checkpoint directory.
fn job_dirs(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn range(text: &str) -> PortRange {
    let (a, b) = bounds(text);
    PortRange {
        first: a,
        count: b - a + 1,
    }
}

fn bounds(range: &str) -> (u16, u16) {
    let (a, b) = range.split_once('-').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

/// The first and the second half of a `FIRST-LAST` range.
fn split(range: &str) -> (String, String) {
    let (a, b) = bounds(range);
    let mid = a + (b - a) / 2;
    (format!("{a}-{mid}"), format!("{}-{b}", mid + 1))
}

/// A batch of two copies under a cap with room for one: the other is skipped; the one started
/// is recalled (SIGINT to the CLI, which raises the recall flag) as soon
/// as its job was submitted; returns seconds from the signal to the CLI's exit, after checking
/// the copy reported itself aborted and the CLI failed (no measurement).
async fn run_and_recall(
    jar: PathBuf,
    flink_home: String,
    rest_ports: String,
    rpc_ports: String,
    work: PathBuf,
) -> f64 {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = tokio::process::Command::new(binary("demeter-coordinator"))
        .arg("profile")
        .args(["--batch", "2"])
        .arg("--jar")
        .arg(&jar)
        .args(["--entry-class", ENTRY])
        .args(["--profile-args", "--rate {rate} --sink discard"])
        .args(["--rate", "100", "--config", LOW, "--config", HIGH])
        // Room for LOW (1024m + a 640m JobManager) but not for HIGH as well.
        .args(["--jm-memory", "640m", "--cap-memory", "2g"])
        .args(["--rest-ports", &rest_ports, "--rpc-ports", &rpc_ports])
        .arg("--work-dir")
        .arg(&work)
        .env("FLINK_HOME", flink_home)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        let started = line.contains(": Starting");
        seen.push(line);
        if started {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains(": Starting")),
        "the recalled copy never started: {seen:?}"
    );
    let signalled = std::time::Instant::now();
    let pid = child.id().unwrap().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    let status = child.wait().await.unwrap();
    let took = signalled.elapsed().as_secs_f64();
    println!("recalled batch:\n  {}", seen.join("\n  "));
    assert!(!status.success(), "a batch without a measurement fails");
    assert!(
        seen.iter()
            .any(|l| l.starts_with(&format!("skipped {}", HIGH.parse::<JobConfig>().unwrap()))),
        "the copy over the cap is skipped: {seen:?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.contains("finished, aborted: interrupted")),
        "{seen:?}"
    );
    took
}

async fn start_production(client: &FlinkClient, jar: &Path, out: &Path) -> JobId {
    let jar_id = client.upload_jar(jar).await.unwrap();
    let request = JarRunRequest {
        entry_class: Some(ENTRY.into()),
        program_args_list: ["--rate", "300", "--sink", "file", "--output"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("file://{}", out.display())])
            .collect(),
        parallelism: Some(1),
        flink_configuration: [("execution.checkpointing.interval".into(), "5 s".into())].into(),
        ..JarRunRequest::default()
    };
    let job = client.run_jar(&jar_id, &request).await.unwrap();
    for _ in 0..120 {
        if client
            .job_details(&job)
            .await
            .is_ok_and(|d| d.is_fully_running())
        {
            return job;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("production job {job} not RUNNING after 60 s");
}

async fn stop_and_check(client: &FlinkClient, job: &JobId, repo: &Path, out: &Path) -> u64 {
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

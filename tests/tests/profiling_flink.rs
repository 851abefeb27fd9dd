//! Profiling copies on real Flink 2.3 beside a production cluster: production (JobManager +
//! one TaskManager from `scripts/flink-lab.sh`) runs the benchmark job with its exactly-once
//! FileSink; one profiling batch of two candidates (different slots and memory) runs through
//! the real `demeter-coordinator profile` CLI at a CPU-bound rate (`--work-us`), with short
//! warm-up and measurement windows. Beside it a second batch runs under a cap with room for
//! one of its two copies (the other is reported skipped) and is recalled (Ctrl-C raises the
//! recall flag) once its job runs. Checks: both measured copies yield plausible observations,
//! the higher-capacity one is less busy at the same rate, the recalled copy reports aborted,
//! nothing of either batch is left (JVMs, ports, directories), and production is unaffected
//! (same job RUNNING, never restarted, exactly-once output intact). Prints start-up, recovery
//! and batch wall times.
//!
//! Runs only when `DEMETER_LAB` names an installed lab. Ports: production REST/RPC
//! `DEMETER_PROFILING_PROD_REST_PORT` (18491) / `DEMETER_PROFILING_PROD_RPC_PORT` (16491);
//! copies `DEMETER_PROFILING_REST_PORTS` (18500-18519) / `DEMETER_PROFILING_RPC_PORTS`
//! (16500-16519).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use demeter_coordinator::flink::{
    ClientConfig, FlinkClient, JarRunRequest, JobId, JobState, SavepointFormat, StopRequest,
};
use demeter_coordinator::models::observations::parse_csv;
use demeter_coordinator::models::space::JobConfig;
use demeter_coordinator::profiler::host::{port_free, processes_naming};
use demeter_tests::lab::Lab;
use demeter_tests::{Scratch, binary};

const ENTRY: &str = "io.demeter.bench.BenchJob";
/// Records/s fed to each copy; with `--work-us 1000` a window subtask is ~40 % busy at 400/s.
const RATE: &str = "400";
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
    let observations = scratch.path.join("observations.csv");

    let cluster = lab.start_with("prof", rest, rpc, &["--taskmanagers", "1", "--slots", "2"]);
    let client =
        FlinkClient::new(&format!("http://127.0.0.1:{rest}"), ClientConfig::default()).unwrap();
    let job = start_production(&client, &jar, &out).await;

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
    let started = std::time::Instant::now();
    let cli = tokio::process::Command::new(binary("demeter-coordinator"))
        .arg("profile")
        .args(["--batch", "1"])
        .arg("--jar")
        .arg(&jar)
        .args(["--entry-class", ENTRY])
        .args([
            "--profile-args",
            "--rate {rate} --sink discard --work-us 1000",
        ])
        .args(["--rate", RATE, "--config", LOW, "--config", HIGH])
        .args([
            "--warmup",
            "20s",
            "--measure",
            "20s",
            "--max-recovery",
            "90s",
        ])
        .args(["--rest-ports", &main_rest, "--rpc-ports", &main_rpc])
        .args([
            "--cap-cpu",
            "3",
            "--cap-memory",
            "5g",
            "--jm-memory",
            "640m",
        ])
        .arg("--work-dir")
        .arg(&work)
        .arg("--observations-out")
        .arg(&observations)
        .env("FLINK_HOME", &cluster.env["FLINK_HOME"])
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    let batch_s = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&cli.stdout);
    print!("{stdout}");
    assert!(
        cli.status.success(),
        "profile failed ({}): {}",
        cli.status,
        String::from_utf8_lossy(&cli.stderr)
    );

    // Both copies measured, with plausible numbers.
    let obs = parse_csv(
        &std::fs::read_to_string(&observations).unwrap(),
        "observations",
    )
    .unwrap();
    assert_eq!(obs.len(), 2, "{obs:?}");
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
            (o.rate - 400.0).abs() < 120.0,
            "rate near the ordered one: {o:?}"
        );
    }
    assert!(
        high.busy_fraction.unwrap() < low.busy_fraction.unwrap(),
        "two window subtasks must be less busy than one at the same rate: {low:?} vs {high:?}"
    );

    let recalled_after_s = recalled.await.unwrap();

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
    println!("  batch wall time (CLI start → all copies torn down): {batch_s:.1} s");
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

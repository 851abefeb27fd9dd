//! The supervisor against a real Flink 2.3 JobManager (child backend): start two TaskManagers,
//! see them registered over REST with their slots, restart one with another memory size, kill
//! one with SIGKILL, stop the other, and check no TaskManager JVM is left.
//!
//! Needs a Flink lab (`scripts/flink-lab.sh install`): `DEMETER_LAB` (default `<repo>/.lab`) and
//! the script at `DEMETER_FLINK_LAB_SCRIPT` (default `<repo>/scripts/flink-lab.sh`). Skips, with
//! the reason printed, when either is missing. Uses REST 18281 / RPC 16281.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use demeter_agent::supervisor::config::{BackendKind, ClusterPaths, SupervisorConfig};
use demeter_agent::supervisor::{self, Supervisor};
use demeter_common::protocol::{TaskManagerSpec, TaskManagerState};

const CLUSTER: &str = "sup-test";
const REST_PORT: u16 = 18281;
const RPC_PORT: u16 = 16281;
const MIB: u64 = 1 << 20;

struct Lab {
    script: PathBuf,
    lab: PathBuf,
}

impl Lab {
    fn find() -> Result<Self, String> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let script = std::env::var_os("DEMETER_FLINK_LAB_SCRIPT")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("scripts/flink-lab.sh"));
        let lab = std::env::var_os("DEMETER_LAB")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join(".lab"));
        if !script.exists() {
            return Err(format!("no lab script at {}", script.display()));
        }
        if !lab.join("venv/.flink-2.3.0-complete").exists() {
            return Err(format!(
                "Flink is not installed in {} (run scripts/flink-lab.sh install)",
                lab.display()
            ));
        }
        Ok(Self { script, lab })
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("bash")
            .arg(&self.script)
            .args(args)
            .env("DEMETER_LAB", &self.lab)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "flink-lab.sh {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `export A=… B=…` lines from `flink-lab.sh env`, as a map.
    fn env(&self) -> BTreeMap<String, String> {
        self.run(&["env", CLUSTER])
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches(['"', '\'']).to_string()))
            .collect()
    }
}

/// Stops the cluster (JobManager and any TaskManager started with its conf dir) even when the
/// test fails.
struct StopOnDrop<'a>(&'a Lab);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.0.script)
            .args(["stop", CLUSTER])
            .env("DEMETER_LAB", &self.0.lab)
            .output();
    }
}

fn spec(id: &str, mb: u32, slots: u32, cpu_millis: u32) -> TaskManagerSpec {
    TaskManagerSpec {
        id: id.to_string(),
        cluster: CLUSTER.to_string(),
        process_memory_mb: mb,
        slots,
        cpu_millis,
        properties: vec![],
    }
}

fn rest(path: &str) -> Option<serde_json::Value> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5"])
        .arg(format!("http://127.0.0.1:{REST_PORT}{path}"))
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// Registered TaskManagers by id: (slots, total process memory in MiB).
fn registered() -> BTreeMap<String, (u64, u64)> {
    let Some(body) = rest("/taskmanagers") else {
        return BTreeMap::new();
    };
    body["taskmanagers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tm| {
            Some((
                tm["id"].as_str()?.to_string(),
                (
                    tm["slotsNumber"].as_u64()?,
                    tm["memoryConfiguration"]["totalProcessMemory"].as_u64()? / MIB,
                ),
            ))
        })
        .collect()
}

fn wait_registered(want: &[(&str, (u64, u64))], timeout: Duration) -> BTreeMap<String, (u64, u64)> {
    let start = Instant::now();
    loop {
        let now = registered();
        if want.iter().all(|(id, v)| now.get(*id) == Some(v)) {
            println!(
                "registered after {:.1} s: {now:?}",
                start.elapsed().as_secs_f64()
            );
            return now;
        }
        assert!(
            start.elapsed() < timeout,
            "want {want:?}, REST shows {now:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Pids whose command line carries `taskmanager.resource-id=<id>` for one of `ids`.
fn taskmanager_jvms(ids: &[&str]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            ids.iter()
                .any(|id| cmdline.contains(&format!("taskmanager.resource-id={id} ")))
        })
        .collect()
}

async fn running_pid(supervisor: &Supervisor, s: TaskManagerSpec) -> u32 {
    let status = supervisor.start_task_manager(s).await.unwrap();
    assert_eq!(status.state, TaskManagerState::Running, "{status:?}");
    status.pid.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervisor_runs_real_taskmanagers() {
    let lab = match Lab::find() {
        Ok(lab) => lab,
        Err(reason) => {
            println!("SKIPPED supervisor_runs_real_taskmanagers: {reason}");
            return;
        }
    };
    let _stop = StopOnDrop(&lab);
    let t0 = Instant::now();
    lab.run(&[
        "start",
        CLUSTER,
        "--taskmanagers",
        "0",
        "--rest-port",
        &REST_PORT.to_string(),
        "--rpc-port",
        &RPC_PORT.to_string(),
    ]);
    println!("JobManager up after {:.1} s", t0.elapsed().as_secs_f64());
    let env = lab.env();
    let paths = ClusterPaths {
        flink_home: env["FLINK_HOME"].clone().into(),
        conf_dir: env["FLINK_CONF_DIR"].clone().into(),
        log_dir: env["FLINK_LOG_DIR"].clone().into(),
        pid_dir: Some(env["FLINK_PID_DIR"].clone().into()),
    };
    let config = SupervisorConfig {
        backend: BackendKind::Child,
        stop_grace_ms: 20_000,
        clusters: BTreeMap::from([(CLUSTER.to_string(), paths)]),
        enforce_cpu: true,
        systemd: Default::default(),
    };
    let supervisor = supervisor::from_config(&config);
    let ids = ["sup-a", "sup-b"];

    // Two TaskManagers through the supervisor; the small one needs the small-size overrides.
    let t0 = Instant::now();
    let (pid_a, pid_b) = tokio::join!(
        running_pid(&supervisor, spec("sup-a", 640, 1, 1000)),
        running_pid(&supervisor, spec("sup-b", 1024, 2, 2000)),
    );
    // The scripts exec down to the JVM (after seconds in helper JVMs): the child's pid
    // becomes java itself.
    for pid in [pid_a, pid_b] {
        let t0 = Instant::now();
        while comm(pid) != "java" {
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "{pid} is {:?}",
                comm(pid)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        println!(
            "pid {pid} is java after {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
    check_cgroup(pid_a, "sup-a", 1000);
    tokio::task::spawn_blocking(|| {
        wait_registered(
            &[("sup-a", (1, 640)), ("sup-b", (2, 1024))],
            Duration::from_secs(240),
        )
    })
    .await
    .unwrap();
    println!(
        "two TaskManagers registered {:.1} s after the start orders",
        t0.elapsed().as_secs_f64()
    );

    // Same spec again: nothing happens (same pid).
    assert_eq!(
        running_pid(&supervisor, spec("sup-b", 1024, 2, 2000)).await,
        pid_b
    );

    // Another size: the old process ends, a new one registers with the new memory.
    let t0 = Instant::now();
    let pid_b2 = running_pid(&supervisor, spec("sup-b", 1280, 2, 2000)).await;
    assert_ne!(pid_b2, pid_b);
    assert!(
        !alive(pid_b),
        "old JVM {pid_b} still alive after the restart"
    );
    tokio::task::spawn_blocking(|| {
        wait_registered(&[("sup-b", (2, 1280))], Duration::from_secs(240))
    })
    .await
    .unwrap();
    println!(
        "restart 1024m → 1280m registered after {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // SIGKILL: reported as a failure the coordinator caused, and the JVM is gone.
    let killed = supervisor.kill_task_manager("sup-a").await.unwrap();
    assert_eq!(
        killed.state,
        TaskManagerState::Failed("killed by signal 9 (SIGKILL) on the coordinator's order".into())
    );
    assert!(!alive(pid_a), "JVM {pid_a} survived SIGKILL");

    // Graceful stop: SIGTERM, the JVM shuts down within the grace period.
    let t0 = Instant::now();
    let stopped = supervisor.stop_task_manager("sup-b").await.unwrap();
    assert_eq!(stopped.state, TaskManagerState::Stopped);
    println!("graceful stop took {:.1} s", t0.elapsed().as_secs_f64());
    assert!(!alive(pid_b2));
    assert_eq!(
        taskmanager_jvms(&ids),
        Vec::<u32>::new(),
        "TaskManager JVMs left"
    );
    let states: Vec<_> = supervisor
        .list()
        .unwrap()
        .into_iter()
        .map(|s| (s.spec.id, s.state))
        .collect();
    println!("final states: {states:?}");
}

/// With an enforceable cgroup, the JVM sits in `demeter-tm-<id>` with the quota; otherwise the
/// test says that the limit is not enforced on this host.
fn check_cgroup(pid: u32, id: &str, cpu_millis: u32) {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let limiter = supervisor::cgroup::CpuLimiter::detect(Path::new("/sys/fs/cgroup"), &own);
    let Some(dir) = limiter.dir(id) else {
        println!("CPU limit not enforced on this host: {limiter:?}");
        return;
    };
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|p| p == pid.to_string()),
        "{pid} not in {}",
        dir.display()
    );
    let quota = std::fs::read_to_string(dir.join("cpu.cfs_quota_us"))
        .or_else(|_| std::fs::read_to_string(dir.join("cpu.max")))
        .unwrap();
    let want = supervisor::cgroup::quota_us(cpu_millis)
        .unwrap()
        .to_string();
    assert!(quota.starts_with(&want), "quota {quota:?}, want {want}");
    println!("JVM {pid} in {} with quota {}", dir.display(), quota.trim());
}

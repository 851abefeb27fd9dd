//! The child backend with stand-in `bin/taskmanager.sh` scripts (no Flink needed): exit
//! statuses, SIGTERM ignored → SIGKILL after the grace period, shutdown, and whether the CPU
//! limit is really enforced on this host (a busy loop in its cgroup).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use demeter_agent::supervisor::cgroup::CpuLimiter;
use demeter_agent::supervisor::config::{BackendKind, ClusterPaths, SupervisorConfig};
use demeter_agent::supervisor::{self, Supervisor};
use demeter_common::protocol::{TaskManagerSpec, TaskManagerState};

/// A fake FLINK_HOME whose `bin/taskmanager.sh` runs `body`.
fn fake_cluster(dir: &Path, body: &str) -> ClusterPaths {
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let script = dir.join("bin/taskmanager.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    ClusterPaths {
        flink_home: dir.to_path_buf(),
        conf_dir: dir.to_path_buf(),
        log_dir: dir.to_path_buf(),
        pid_dir: None,
    }
}

fn supervisor_for(clusters: &[(&str, ClusterPaths)], grace_ms: u64) -> std::sync::Arc<Supervisor> {
    supervisor::from_config(&SupervisorConfig {
        backend: BackendKind::Child,
        stop_grace_ms: grace_ms,
        clusters: clusters
            .iter()
            .map(|(n, p)| (n.to_string(), p.clone()))
            .collect::<BTreeMap<_, _>>(),
        enforce_cpu: true,
        systemd: Default::default(),
    })
}

fn spec(id: &str, cluster: &str, cpu_millis: u32) -> TaskManagerSpec {
    TaskManagerSpec {
        id: id.into(),
        cluster: cluster.into(),
        process_memory_mb: 1024,
        slots: 1,
        cpu_millis,
        properties: vec![],
    }
}

async fn wait_state(s: &Supervisor, id: &str, want: &TaskManagerState) {
    let t0 = Instant::now();
    loop {
        let state = s
            .list()
            .unwrap()
            .into_iter()
            .find(|t| t.spec.id == id)
            .map(|t| t.state);
        if state.as_ref() == Some(want) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{id}: {state:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn exits_stops_and_escalation() {
    let dir = tempfile::tempdir().unwrap();
    let crash = fake_cluster(&dir.path().join("crash"), "sleep 0.3; exit 3");
    // The marker says the trap is installed: a fixed pause lost that race on a loaded CI host
    // (SIGTERM landed first and the "grace period" check failed).
    let trapped = dir.path().join("stubborn-trapped");
    let stubborn = fake_cluster(
        &dir.path().join("stubborn"),
        &format!(
            "trap '' TERM\ntouch '{}'\nwhile :; do sleep 0.1; done",
            trapped.display()
        ),
    );
    let polite = fake_cluster(&dir.path().join("polite"), "exec sleep 1000");
    let s = supervisor_for(
        &[("crash", crash), ("stubborn", stubborn), ("polite", polite)],
        1000,
    );

    // Unknown cluster: the start order fails with the reason.
    let status = s.start_task_manager(spec("x", "nowhere", 0)).await.unwrap();
    assert!(
        matches!(&status.state, TaskManagerState::Failed(r) if r.contains("nowhere")),
        "{status:?}"
    );

    s.start_task_manager(spec("c", "crash", 0)).await.unwrap();
    wait_state(
        &s,
        "c",
        &TaskManagerState::Failed("exited with status 3".into()),
    )
    .await;

    let t = s
        .start_task_manager(spec("t", "stubborn", 0))
        .await
        .unwrap();
    let pid = t.pid.unwrap();
    let waited = Instant::now();
    while !trapped.exists() {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the stubborn TaskManager never installed its trap"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t0 = Instant::now();
    let stopped = s.stop_task_manager("t").await.unwrap();
    assert_eq!(stopped.state, TaskManagerState::Stopped);
    assert!(
        t0.elapsed() >= Duration::from_millis(1000),
        "killed before the grace period"
    );
    assert!(!Path::new(&format!("/proc/{pid}")).exists());

    // Output goes to the per-TaskManager log file.
    assert!(dir.path().join("crash/taskmanager-c.out").exists());

    // Shutdown stops what runs (SIGTERM suffices here).
    let p = s.start_task_manager(spec("p", "polite", 0)).await.unwrap();
    s.shutdown().await;
    assert_eq!(
        s.list()
            .unwrap()
            .into_iter()
            .find(|t| t.spec.id == "p")
            .unwrap()
            .state,
        TaskManagerState::Stopped
    );
    assert!(!Path::new(&format!("/proc/{}", p.pid.unwrap())).exists());
}

/// CPU seconds (user + system) of a process from /proc/<pid>/stat.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[tokio::test]
async fn cpu_limit_is_enforced_when_the_host_allows() {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let limiter = CpuLimiter::detect(Path::new("/sys/fs/cgroup"), &own);
    if let CpuLimiter::Unavailable { reason } = &limiter {
        println!("SKIPPED: CPU limits are not enforced on this host: {reason}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let busy = fake_cluster(dir.path(), "while :; do :; done");
    let s = supervisor_for(&[("busy", busy)], 1000);
    let status = s
        .start_task_manager(spec("cpu-probe", "busy", 200))
        .await
        .unwrap();
    let pid = status.pid.unwrap();
    let t0 = Instant::now();
    let cpu0 = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let share = (cpu_seconds(pid) - cpu0) / t0.elapsed().as_secs_f64();
    let cgroup = limiter.dir("cpu-probe").unwrap();
    let stat = std::fs::read_to_string(cgroup.join("cpu.stat")).unwrap();
    println!(
        "busy loop under a 0.2-core limit used {share:.3} cores; {}",
        stat.replace('\n', " ")
    );
    s.shutdown().await;
    // Contention can only lower the share; the limit caps it at 0.2 (+ tick rounding).
    assert!(
        share <= 0.3,
        "busy loop used {share:.3} cores under a 0.2-core limit"
    );
    let throttled: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("nr_throttled "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(throttled > 0, "never throttled: {stat}");
    assert!(!cgroup.exists(), "cgroup {} not removed", cgroup.display());
}

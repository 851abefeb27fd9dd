//! Where a copy's processes run, and the process-level chores of its shell: the JobManager as
//! a child process, the copy's TaskManagers through the executor's backend trait, what they
//! use (from `/proc` here; agents' samples in production), and proving a copy left nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System};

use super::plan::{CopyPlan, Resources};
use crate::executor::taskmanagers::{LocalPaths, LocalTaskManagers, TaskManagers};
use crate::{Error, Result};

/// A host for profiling copies: runs their TaskManagers and measures them.
pub trait CopyHost: Send + Sync + std::fmt::Debug {
    /// The backend that runs this copy's TaskManagers (joining the copy's JobManager).
    fn taskmanagers(&self, plan: &CopyPlan) -> Arc<dyn TaskManagers>;
    /// CPU cores and resident memory (MiB) the copy's TaskManagers use now; `None` if unknown.
    fn usage(&self, plan: &CopyPlan) -> Option<Resources>;
    /// What the host can still give profiling now (`None`: only the cap limits).
    fn available(&self) -> Option<Resources>;
    /// Whether [`Self::available`] is where the TaskManagers run and the copies' JobManagers
    /// (always on the coordinator's host) are not in it.
    fn jobmanagers_elsewhere(&self) -> bool {
        false
    }
    /// The copy is gone: forget what was kept for it.
    fn release(&self, _plan: &CopyPlan) {}
    /// Why production needs the resources back now (memory below the reserve where copies
    /// run), if it does: every running copy is then recalled.
    fn pressed(&self) -> Option<String> {
        self.available()
            .is_some_and(|free| free.memory_mb <= 0.0)
            .then(|| "production needs the memory (host free memory below the reserve)".into())
    }
}

/// Copies on this machine: `taskmanager.sh start-foreground` children per copy, CPU and RSS of
/// their JVMs through sysinfo (`/proc`).
#[derive(Debug)]
pub struct LocalHost {
    flink_home: PathBuf,
    /// Memory kept free for production and everything else, MiB.
    reserve_mb: f64,
    /// For the host's free memory.
    system: Mutex<System>,
    /// One per copy: sysinfo computes a process's CPU share against the time since the
    /// System's previous refresh, so copies sampled at different moments must not share one.
    per_copy: Mutex<HashMap<String, System>>,
    backends: Mutex<HashMap<String, Arc<LocalTaskManagers>>>,
}

impl LocalHost {
    pub fn new(flink_home: PathBuf, reserve_mb: f64) -> Result<Self> {
        let system = System::new()
            .map_err(|e| Error::Executor(format!("reading this host's processes: {e}")))?;
        Ok(Self {
            flink_home,
            reserve_mb,
            system: Mutex::new(system),
            per_copy: Mutex::new(HashMap::new()),
            backends: Mutex::new(HashMap::new()),
        })
    }

    fn backend(&self, plan: &CopyPlan) -> Arc<LocalTaskManagers> {
        let make = || {
            Arc::new(LocalTaskManagers::new(LocalPaths {
                flink_home: self.flink_home.clone(),
                conf_dir: plan.conf_dir(),
                log_dir: plan.log_dir(),
            }))
        };
        match self.backends.lock() {
            Ok(mut map) => map.entry(plan.name.clone()).or_insert_with(make).clone(),
            Err(_) => make(),
        }
    }
}

impl CopyHost for LocalHost {
    fn taskmanagers(&self, plan: &CopyPlan) -> Arc<dyn TaskManagers> {
        self.backend(plan)
    }

    fn usage(&self, plan: &CopyPlan) -> Option<Resources> {
        let pids: Vec<sysinfo::Pid> = self
            .backend(plan)
            .jvm_pids(&plan.name)
            .into_iter()
            .map(sysinfo::Pid::from_u32)
            .collect();
        if pids.is_empty() {
            return None;
        }
        let mut systems = self.per_copy.lock().ok()?;
        let system = match systems.entry(plan.name.clone()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(System::new().ok()?),
        };
        // CPU usage is the share since this System last refreshed the pid (0 the first time).
        system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&pids),
            true,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
        let (mut cpu, mut rss) = (0.0, 0.0);
        for pid in &pids {
            if let Some(p) = system.process(*pid) {
                cpu += f64::from(p.cpu_usage()) / 100.0;
                rss += p.memory() as f64 / (1024.0 * 1024.0);
            }
        }
        Some(Resources {
            cpu_cores: cpu,
            memory_mb: rss,
        })
    }

    fn release(&self, plan: &CopyPlan) {
        if let Ok(mut map) = self.per_copy.lock() {
            map.remove(&plan.name);
        }
        if let Ok(mut map) = self.backends.lock() {
            map.remove(&plan.name);
        }
    }

    fn available(&self) -> Option<Resources> {
        let mut system = self.system.lock().ok()?;
        system.refresh_memory();
        Some(Resources {
            cpu_cores: f64::INFINITY,
            memory_mb: (system.available_memory() as f64 / (1024.0 * 1024.0) - self.reserve_mb)
                .max(0.0),
        })
    }
}

/// Starts the copy's JobManager: `jobmanager.sh start-foreground` in its own process group
/// (so the whole group can be signalled), output to `log/jobmanager.out`.
pub fn spawn_jobmanager(flink_home: &Path, plan: &CopyPlan) -> Result<tokio::process::Child> {
    let io = |context: String| move |source| Error::Io { context, source };
    let out_path = plan.log_dir().join("jobmanager.out");
    let out =
        std::fs::File::create(&out_path).map_err(io(format!("creating {}", out_path.display())))?;
    let err = out
        .try_clone()
        .map_err(io("duplicating a log handle".into()))?;
    let child = tokio::process::Command::new(flink_home.join("bin/jobmanager.sh"))
        .arg("start-foreground")
        .env("FLINK_HOME", flink_home)
        .env("FLINK_CONF_DIR", plan.conf_dir())
        .env("FLINK_LOG_DIR", plan.log_dir())
        .env("FLINK_PID_DIR", plan.dir.join("pid"))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(io(format!("starting the JobManager of {}", plan.name)))?;
    tracing::info!(copy = %plan.name, pid = child.id(), rest = plan.rest_port, rpc = plan.rpc_port,
        "profiling JobManager started");
    Ok(child)
}

/// Signals a process group; ESRCH (gone already) is what we want anyway.
pub fn signal_group(pgid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) {
        let _ = kill_process_group(pid, signal);
    }
}

/// SIGKILLs a process and, if it leads one, its process group.
pub fn kill_hard(pid: u32) {
    if let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = kill_process(p, Signal::KILL);
        let _ = kill_process_group(p, Signal::KILL);
    }
}

/// Live processes whose command line or environment names `dir` (the copy's directory): its
/// JobManager, TaskManagers and any helper their scripts started. The safety net of the
/// tear-down, like `flink-lab.sh stop`'s search by conf dir.
pub fn processes_naming(dir: &Path) -> Vec<u32> {
    // With the trailing slash `…/prof-b1-c1/` does not match `…/prof-b1-c10/`.
    let needle = format!("{}/", dir.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let names = |file: &str| {
                std::fs::read(format!("/proc/{pid}/{file}")).is_ok_and(|raw| {
                    raw.split(|b| *b == 0)
                        .any(|arg| String::from_utf8_lossy(arg).contains(&needle))
                })
            };
            // Zombies have an empty command line; they hold no port or memory.
            names("cmdline") || names("environ")
        })
        .collect()
}

/// Whether nothing listens on 127.0.0.1:`port`. Probed by connecting, not binding: a test
/// bind could take the port from under a JobManager starting at that moment.
pub fn port_free(port: u16) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_err()
}

/// Ports of `ports` something is bound to now.
pub fn busy_ports(ports: impl Iterator<Item = u16>) -> Vec<u16> {
    ports.filter(|p| !port_free(*p)).collect()
}

/// Waits until `check` holds, polling every 200 ms, at most `within`.
pub async fn wait_until(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    #[test]
    fn processes_are_found_by_the_directory_they_name_and_not_by_a_longer_one() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("prof-b1-c1");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("FLINK_CONF_DIR", copy.join("conf"))
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until the child has exec'd, /proc shows the parent's environment.
        let found = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            processes_naming(&copy).contains(&pid)
        });
        assert!(found);
        assert!(!processes_naming(&dir.path().join("prof-b1-c")).contains(&pid));
        signal_group(pid, Signal::KILL);
        child.wait().unwrap();
        assert!(!processes_naming(&copy).contains(&pid));
    }

    #[test]
    fn a_listening_port_is_busy_and_free_once_closed() {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(!port_free(port));
        assert_eq!(busy_ports([port].into_iter()), vec![port]);
        drop(listener);
        // Tests run in parallel: another one may bind the freed ephemeral port for a moment.
        let freed = (0..20).any(|_| {
            let free = port_free(port);
            if !free {
                std::thread::sleep(Duration::from_millis(100));
            }
            free
        });
        assert!(
            freed,
            "port {port} still busy 2 s after its listener closed"
        );
    }
}

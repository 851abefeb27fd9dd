//! TaskManagers as local processes: `$FLINK_HOME/bin/taskmanager.sh start-foreground -D …`,
//! each in its own process group so it survives the coordinator (a CLI run, or a crash), and
//! found by scanning `/proc` for `taskmanager.resource-id=<id>` plus the cluster's conf dir.
//! The CPU limit is not enforced here (the agent's cgroups do that in production).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use demeter_common::protocol::TaskManagerSpec;
use rustix::process::{Pid, Signal, kill_process_group};

use super::{BoxFuture, TaskManagers, prefix};
use crate::{Error, Result};

/// The cluster a local TaskManager joins (what `flink-lab.sh env NAME` exports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPaths {
    pub flink_home: PathBuf,
    pub conf_dir: PathBuf,
    pub log_dir: PathBuf,
}

#[derive(Debug)]
pub struct LocalTaskManagers {
    paths: LocalPaths,
    stop_grace: Duration,
    /// Children this process started, kept so they are reaped when they end.
    children: Mutex<HashMap<String, tokio::process::Child>>,
}

/// A TaskManager process found in `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    id: String,
    pgid: i32,
    /// Every process of the group seen (the start script, if it has not exec'd yet, and the JVM).
    pids: Vec<i32>,
    memory: Option<String>,
    slots: Option<String>,
}

impl LocalTaskManagers {
    pub fn new(paths: LocalPaths) -> Self {
        Self {
            paths,
            stop_grace: Duration::from_secs(20),
            children: Mutex::new(HashMap::new()),
        }
    }

    /// TaskManager processes of this cluster whose id starts with `id_prefix`, one per
    /// process group (the script and the JVM it became share one).
    fn scan(&self, id_prefix: &str) -> Vec<Found> {
        let conf = self.paths.conf_dir.to_string_lossy().into_owned();
        let mut found: Vec<Found> = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return found;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            // Zombies have an empty command line and drop out here.
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let value = |key: &str| {
                args.iter().find_map(|a| {
                    a.trim_start_matches("-D")
                        .strip_prefix(&format!("{key}="))
                        .map(str::to_string)
                })
            };
            let Some(id) = value("taskmanager.resource-id") else {
                continue;
            };
            // The JVM names the conf dir on its command line; the scripts before it only have
            // it in their environment.
            let in_cluster = args.iter().any(|a| a.contains(&conf))
                || std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                    env.split(|b| *b == 0)
                        .any(|v| v == format!("FLINK_CONF_DIR={conf}").as_bytes())
                });
            if !id.starts_with(id_prefix) || !in_cluster {
                continue;
            }
            let Some(pgid) = process_group(pid) else {
                continue;
            };
            if let Some(group) = found.iter_mut().find(|f| f.pgid == pgid) {
                group.pids.push(pid);
                continue;
            }
            found.push(Found {
                id,
                pgid,
                pids: vec![pid],
                memory: value("taskmanager.memory.process.size"),
                slots: value("taskmanager.numberOfTaskSlots"),
            });
        }
        found
    }

    /// Pids of the Java processes of the job's TaskManagers (for measuring the CPU and memory
    /// they actually use from `/proc`).
    pub fn jvm_pids(&self, job: &str) -> Vec<u32> {
        self.scan(&prefix(job))
            .iter()
            .flat_map(|f| f.pids.iter().copied())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "java")
            })
            .filter_map(|pid| u32::try_from(pid).ok())
            .collect()
    }

    fn spawn(&self, spec: &TaskManagerSpec) -> Result<()> {
        let io = |context: String| move |source| Error::Io { context, source };
        std::fs::create_dir_all(&self.paths.log_dir)
            .map_err(io(format!("creating {}", self.paths.log_dir.display())))?;
        let out_path = self
            .paths
            .log_dir
            .join(format!("taskmanager-{}.out", spec.id));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .map_err(io(format!("opening {}", out_path.display())))?;
        let err = out
            .try_clone()
            .map_err(io("duplicating a log handle".into()))?;
        let mut command =
            tokio::process::Command::new(self.paths.flink_home.join("bin/taskmanager.sh"));
        command.arg("start-foreground");
        for (key, value) in spec.dynamic_properties() {
            command.arg("-D").arg(format!("{key}={value}"));
        }
        command
            .env("FLINK_HOME", &self.paths.flink_home)
            .env("FLINK_CONF_DIR", &self.paths.conf_dir)
            .env("FLINK_LOG_DIR", &self.paths.log_dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = command
            .spawn()
            .map_err(io(format!("starting TaskManager {}", spec.id)))?;
        tracing::info!(id = %spec.id, pid = child.id(), memory_mb = spec.process_memory_mb,
            slots = spec.slots, "local TaskManager started");
        if let Ok(mut children) = self.children.lock() {
            children.insert(spec.id.clone(), child);
        }
        Ok(())
    }

    async fn stop(&self, found: &Found) {
        tracing::info!(id = %found.id, pgid = found.pgid, "stopping local TaskManager");
        signal_group(found.pgid, Signal::TERM);
        let started = tokio::time::Instant::now();
        while group_alive(found.pgid) {
            if started.elapsed() > self.stop_grace {
                signal_group(found.pgid, Signal::KILL);
            }
            self.reap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.reap();
    }

    fn reap(&self) {
        if let Ok(mut children) = self.children.lock() {
            children.retain(|_, c| matches!(c.try_wait(), Ok(None)));
        }
    }

    /// Ids starting with `id_prefix` of the TaskManagers this process started that have not
    /// ended: the child handle knows, whatever `/proc` shows.
    fn live_children(&self, id_prefix: &str) -> Vec<String> {
        self.reap();
        self.children.lock().map_or_else(
            |_| Vec::new(),
            |children| {
                children
                    .keys()
                    .filter(|id| id.starts_with(id_prefix))
                    .cloned()
                    .collect()
            },
        )
    }

    /// [`Self::scan`], waiting (at most [`SETTLE`]) until every TaskManager this process
    /// started and that still runs is seen. While a start script execs (`env` → `bash` →
    /// `flink-console.sh` → `java`) its `/proc/<pid>/cmdline` reads empty, for up to 15 ms
    /// measured here, and a scan at that moment misses a live TaskManager: one scan right
    /// after the spawn once failed a profiling copy as "exited before it registered".
    async fn scan_settled(&self, id_prefix: &str) -> Vec<Found> {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            let found = self.scan(id_prefix);
            let unseen = self
                .live_children(id_prefix)
                .into_iter()
                .any(|id| !found.iter().any(|f| f.id == id));
            if !unseen || tokio::time::Instant::now() >= deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// How long [`LocalTaskManagers::scan_settled`] waits for a started TaskManager to show.
const SETTLE: Duration = Duration::from_secs(1);

fn signal_group(pgid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pgid) {
        // ESRCH (already gone) is the outcome we want anyway.
        let _ = kill_process_group(pid, signal);
    }
}

/// Field 5 of `/proc/<pid>/stat` (after the parenthesised command name).
fn process_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?;
    if state == "Z" {
        return None;
    }
    fields.nth(1)?.parse().ok()
}

/// Whether any live (non-zombie) process is in the group.
fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc").is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
                .and_then(process_group)
                == Some(pgid)
        })
    })
}

fn matches(found: &Found, spec: &TaskManagerSpec) -> bool {
    found.memory.as_deref() == Some(&format!("{}m", spec.process_memory_mb))
        && found.slots.as_deref() == Some(&spec.slots.to_string())
}

impl TaskManagers for LocalTaskManagers {
    fn ensure<'a>(
        &'a self,
        job: &'a str,
        specs: &'a [TaskManagerSpec],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let running = self.scan_settled(&prefix(job)).await;
            for found in &running {
                let keep = specs.iter().any(|s| s.id == found.id && matches(found, s));
                if !keep {
                    self.stop(found).await;
                }
            }
            for spec in specs {
                if !running.iter().any(|f| f.id == spec.id && matches(f, spec)) {
                    self.spawn(spec)?;
                }
            }
            Ok(())
        })
    }

    fn alive<'a>(&'a self, job: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(async move {
            let mut ids: Vec<String> = self
                .scan_settled(&prefix(job))
                .await
                .into_iter()
                .map(|f| f.id)
                .collect();
            // A child still running is alive even if `/proc` has not shown it within SETTLE.
            for id in self.live_children(&prefix(job)) {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            Ok(ids)
        })
    }

    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let found: Vec<Found> = self
                .scan_settled(id)
                .await
                .into_iter()
                .filter(|f| f.id == id)
                .collect();
            if found.is_empty() {
                return Err(Error::Executor(format!(
                    "no local TaskManager {id} to kill"
                )));
            }
            for f in &found {
                tracing::info!(id, pgid = f.pgid, "SIGKILL local TaskManager");
                signal_group(f.pgid, Signal::KILL);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;

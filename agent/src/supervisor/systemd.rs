//! Production: each TaskManager is `flink-taskmanager@<id>.service`, driven exactly as
//! `ops/systemd/README.md` ("Contract: how the agent runs TaskManagers") says: write
//! `<env_dir>/<id>.env` atomically (mode 0644), `set-property --runtime` the CPU and memory
//! limits, `start`; `stop` then delete the file; `kill --signal=SIGKILL`; `reset-failed`
//! before starting a unit again; `show -p ActiveState,SubState,MainPID,Result` to observe.
//!
//! Differences from the child backend, by the contract: only memory and slots reach Flink
//! (extra `properties` are refused; the launcher reads two keys), the cluster is the one the
//! units are configured for, Flink's resource id is `<hostname>-<id>`, and a restart with a
//! new spec is `stop` + `start` (the supervisor core restarts uniformly), not `restart`.
//! Stopping is bounded by the unit's `TimeoutStopSec=60`, after which systemd kills.
//! Units keep running when the agent stops. A real run needs systemd as PID 1; the
//! command construction is unit-tested here and `tests/ops/systemd-boot.sh` exercises the verbs.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use demeter_common::protocol::TaskManagerSpec;
use tokio::sync::mpsc;
use tracing::warn;

use super::config::SystemdConfig;
use super::state::Exit;
use super::{Backend, BoxFuture, Event};
use crate::error::{Error, Result};

/// Instance names the agent uses: `[a-z0-9-]{1,64}` (the contract allows more; this is its
/// recommendation, and it keeps names safe in unit names, file names and Flink ids).
pub fn check_instance(id: &str) -> Result<()> {
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidSpec(format!(
            "id {id:?}: systemd instances use 1-64 characters of [a-z0-9-]"
        )))
    }
}

/// The instance file: exactly the two keys the unit's launcher accepts.
pub fn env_file(spec: &TaskManagerSpec) -> String {
    format!(
        "TM_PROCESS_MEMORY={}m\nTM_SLOTS={}\n",
        spec.process_memory_mb, spec.slots
    )
}

/// `MemoryMax=` in MiB: the process size plus max(⌈m/10⌉, 64) for native memory Flink does not
/// account, so the OOM killer only stops a real leak.
pub fn memory_max_mib(process_mb: u32) -> u64 {
    let m = u64::from(process_mb);
    m + m.div_ceil(10).max(64)
}

/// `CPUQuota=` in percent of one core (rounded up); empty = no limit.
pub fn cpu_quota(cpu_millis: u32) -> String {
    if cpu_millis == 0 {
        String::new()
    } else {
        format!("{}%", cpu_millis.div_ceil(10))
    }
}

/// argv (after the systemctl path) for each step; `--no-ask-password` always, so a missing
/// polkit grant fails instead of prompting.
pub fn set_property_args(unit: &str, spec: &TaskManagerSpec) -> Vec<String> {
    vec![
        "--no-ask-password".into(),
        "set-property".into(),
        "--runtime".into(),
        unit.into(),
        format!("CPUQuota={}", cpu_quota(spec.cpu_millis)),
        format!("MemoryMax={}M", memory_max_mib(spec.process_memory_mb)),
    ]
}

pub fn verb_args(verb: &str, unit: &str) -> Vec<String> {
    let mut args = vec!["--no-ask-password".to_string()];
    match verb {
        "kill" => args.extend(["kill".into(), "--signal=SIGKILL".into()]),
        "show" => args.extend([
            "show".into(),
            "-p".into(),
            "ActiveState,SubState,MainPID,Result".into(),
        ]),
        other => args.push(other.into()),
    }
    args.push(unit.into());
    args
}

/// What `systemctl show -p ActiveState,SubState,MainPID,Result` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitState {
    pub active_state: String,
    pub sub_state: String,
    pub main_pid: Option<u32>,
    pub result: String,
}

impl UnitState {
    pub fn parse(text: &str) -> Self {
        let mut state = Self::default();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("ActiveState", v)) => state.active_state = v.to_string(),
                Some(("SubState", v)) => state.sub_state = v.to_string(),
                Some(("MainPID", v)) => state.main_pid = v.parse().ok().filter(|&p| p > 0),
                Some(("Result", v)) => state.result = v.to_string(),
                _ => {}
            }
        }
        state
    }

    /// The process is gone: stopped, failed, or waiting for systemd's automatic restart.
    pub fn ended(&self) -> bool {
        matches!(self.active_state.as_str(), "inactive" | "failed")
            || self.sub_state == "auto-restart"
    }

    pub fn running_pid(&self) -> Option<u32> {
        (self.active_state == "active" && self.sub_state == "running")
            .then_some(self.main_pid)
            .flatten()
    }
}

/// Writes `<dir>/<id>.env` via `<id>.env.tmp`, mode 0644 set explicitly (the agent's umask is
/// 0077 and the unit runs as `flink`), then renamed over the old one.
pub fn write_env_file(dir: &Path, id: &str, contents: &str) -> Result<PathBuf> {
    let target = dir.join(format!("{id}.env"));
    let tmp = dir.join(format!("{id}.env.tmp"));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(contents.as_bytes())?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        file.sync_all()?;
        std::fs::rename(&tmp, &target)
    };
    write().map_err(|e| Error::io(&target, e))?;
    Ok(target)
}

#[derive(Debug)]
pub struct SystemdBackend {
    config: SystemdConfig,
    /// Units started by this agent run and the MainPID last seen; polled for exits.
    watched: Mutex<HashMap<String, Option<u32>>>,
    events: mpsc::UnboundedSender<Event>,
}

impl SystemdBackend {
    pub fn new(config: SystemdConfig, events: mpsc::UnboundedSender<Event>) -> Self {
        Self {
            config,
            watched: Mutex::new(HashMap::new()),
            events,
        }
    }

    fn unit(&self, id: &str) -> String {
        format!("{}{id}.service", self.config.unit_prefix)
    }

    async fn systemctl(&self, args: Vec<String>) -> Result<String> {
        let command = format!("systemctl {}", args.join(" "));
        let out = tokio::process::Command::new(&self.config.systemctl)
            .args(&args)
            .output()
            .await
            .map_err(|e| Error::Command {
                command: command.clone(),
                reason: e.to_string(),
            })?;
        if !out.status.success() {
            return Err(Error::Command {
                command,
                reason: format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    async fn show(&self, id: &str) -> Result<UnitState> {
        Ok(UnitState::parse(
            &self.systemctl(verb_args("show", &self.unit(id))).await?,
        ))
    }

    fn watch(&self, id: &str, pid: Option<u32>) {
        if let Ok(mut w) = self.watched.lock() {
            w.insert(id.to_string(), pid);
        }
    }

    async fn spawn_now(&self, spec: &TaskManagerSpec) -> Result<Option<u32>> {
        check_instance(&spec.id)?;
        super::check_sizes(spec)?;
        if spec.cluster != self.config.cluster {
            return Err(Error::InvalidSpec(format!(
                "cluster {:?}: this agent's units join {:?}",
                spec.cluster, self.config.cluster
            )));
        }
        if !spec.properties.is_empty() {
            return Err(Error::InvalidSpec(
                "the systemd launcher passes only memory and slots; properties are refused".into(),
            ));
        }
        if spec.process_memory_mb < super::child::SMALL_TM_MB {
            warn!(id = %spec.id, mb = spec.process_memory_mb, "small TaskManager: /etc/flink/config.yaml must set small framework/metaspace sizes or it will not start");
        }
        let unit = self.unit(&spec.id);
        // A unit that failed before refuses nothing, but its failed state would hide the next
        // result; the contract's "after a failure" step.
        let _ = self.systemctl(verb_args("reset-failed", &unit)).await;
        write_env_file(&self.config.env_dir, &spec.id, &env_file(spec))?;
        self.systemctl(set_property_args(&unit, spec)).await?;
        self.systemctl(verb_args("start", &unit)).await?;
        let pid = self.show(&spec.id).await?.main_pid;
        self.watch(&spec.id, pid);
        Ok(pid)
    }

    async fn stop_now(&self, id: &str) -> Result<()> {
        let unit = self.unit(id);
        let pid = self
            .watched
            .lock()
            .ok()
            .and_then(|mut w| w.remove(id))
            .flatten();
        self.systemctl(verb_args("stop", &unit)).await?;
        let env = self.config.env_dir.join(format!("{id}.env"));
        if let Err(e) = std::fs::remove_file(&env)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            warn!(file = %env.display(), error = %e, "cannot delete instance file");
        }
        let result = self.show(id).await.map(|s| s.result).unwrap_or_default();
        let _ = self.events.send(Event::Exited {
            id: id.to_string(),
            pid,
            exit: Exit::UnitResult(result),
        });
        Ok(())
    }

    async fn poll_now(&self) {
        let watched: Vec<(String, Option<u32>)> = match self.watched.lock() {
            Ok(w) => w.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            Err(_) => return,
        };
        for (id, last_pid) in watched {
            let Ok(state) = self.show(&id).await else {
                continue;
            };
            if state.ended() && last_pid.is_some() {
                self.watch(&id, None);
                let _ = self.events.send(Event::Exited {
                    id,
                    pid: last_pid,
                    exit: Exit::UnitResult(state.result),
                });
            } else if let Some(pid) = state.running_pid()
                && last_pid != Some(pid)
            {
                self.watch(&id, Some(pid));
                let _ = self.events.send(Event::Respawned { id, pid });
            }
        }
    }
}

impl Backend for SystemdBackend {
    fn spawn<'a>(&'a self, spec: &'a TaskManagerSpec) -> BoxFuture<'a, Result<Option<u32>>> {
        Box::pin(self.spawn_now(spec))
    }

    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.stop_now(id))
    }

    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.systemctl(verb_args("kill", &self.unit(id)))
                .await
                .map(drop)
        })
    }

    fn poll(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.poll_now())
    }

    fn outlives_agent(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[path = "systemd_tests.rs"]
mod tests;

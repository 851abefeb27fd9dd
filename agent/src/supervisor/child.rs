//! Local mode: each TaskManager is a child process of the agent,
//! `$FLINK_HOME/bin/taskmanager.sh start-foreground -D …`, in its own process group, with
//! stdout/stderr in `<log_dir>/taskmanager-<id>.out`. The Flink scripts `exec` down to the JVM,
//! so the child's pid *is* the JVM's (the Flink test checks `/proc/<pid>/comm`), and signals
//! go to the whole process group anyway.
//!
//! If the agent itself dies abruptly (SIGKILL, crash), its TaskManagers keep running in their
//! own process groups: a parent-death signal would need `pre_exec` (unsafe code, which the
//! workspace denies). `scripts/flink-lab.sh stop NAME` finds them by their conf dir.
//!
//! **Small TaskManagers**: below [`SMALL_TM_MB`] Flink's default framework and metaspace sizes
//! do not fit (`IllegalConfigurationException`, the TM never starts), so the agent adds the
//! sizes that were measured to work at 640m (flink-notes §2): metaspace 160m, framework heap
//! and off-heap 64m each, JVM overhead min 128m — unless the spec sets those keys itself.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use demeter_common::protocol::TaskManagerSpec;
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::sync::mpsc;

use super::cgroup::CpuLimiter;
use super::config::ClusterPaths;
use super::state::Exit;
use super::{Backend, BoxFuture, Event};
use crate::error::{Error, Result};

pub use demeter_common::protocol::SMALL_TM_MB;

/// The `-D key=value` properties for a spec (shared with the coordinator's local backend).
pub fn dynamic_properties(spec: &TaskManagerSpec) -> Vec<(String, String)> {
    spec.dynamic_properties()
}

/// Program and arguments. With a cgroup, a shell joins it (writes its pid to `cgroup.procs`)
/// and then execs the script, so the JVM starts inside.
pub fn command_line(
    paths: &ClusterPaths,
    spec: &TaskManagerSpec,
    cgroup_procs: Option<&std::path::Path>,
) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    if let Some(procs) = cgroup_procs {
        argv.extend([
            "/bin/sh".into(),
            "-c".into(),
            r#"echo $$ > "$0" && exec "$@""#.into(),
        ]);
        argv.push(procs.into());
    }
    argv.push(paths.flink_home.join("bin/taskmanager.sh").into());
    argv.push("start-foreground".into());
    for (key, value) in dynamic_properties(spec) {
        argv.push("-D".into());
        argv.push(format!("{key}={value}").into());
    }
    argv
}

/// The environment the Flink scripts read.
pub fn environment(paths: &ClusterPaths, id: &str) -> Vec<(&'static str, OsString)> {
    vec![
        ("FLINK_HOME", paths.flink_home.clone().into()),
        ("FLINK_CONF_DIR", paths.conf_dir.clone().into()),
        ("FLINK_LOG_DIR", paths.log_dir.clone().into()),
        (
            "FLINK_PID_DIR",
            paths
                .pid_dir
                .as_ref()
                .unwrap_or(&paths.log_dir)
                .clone()
                .into(),
        ),
        ("FLINK_IDENT_STRING", format!("taskmanager-{id}").into()),
    ]
}

/// Ids become file and cgroup names: keep them to `[A-Za-z0-9_.-]`, 1–64 characters.
pub fn check_id(id: &str) -> Result<()> {
    let ok = (1..=64).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidSpec(format!(
            "id {id:?}: use 1-64 characters of [A-Za-z0-9_.-]"
        )))
    }
}

#[derive(Debug)]
pub struct ChildBackend {
    clusters: BTreeMap<String, ClusterPaths>,
    cpu: CpuLimiter,
    /// Pids of children not yet reaped: only these are ever signalled (no pid reuse races).
    live: Arc<Mutex<HashMap<String, u32>>>,
    events: mpsc::UnboundedSender<Event>,
}

impl ChildBackend {
    pub fn new(
        clusters: BTreeMap<String, ClusterPaths>,
        cpu: CpuLimiter,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        Self {
            clusters,
            cpu,
            live: Arc::new(Mutex::new(HashMap::new())),
            events,
        }
    }

    pub fn cpu_limiter(&self) -> &CpuLimiter {
        &self.cpu
    }

    fn pid(&self, id: &str) -> Option<u32> {
        self.live.lock().ok()?.get(id).copied()
    }

    fn signal(&self, id: &str, signal: Signal) -> Result<()> {
        let Some(pid) = self.pid(id) else {
            return Ok(()); // already gone (or not yet started): nothing to signal
        };
        let group = i32::try_from(pid)
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| Error::Supervisor(format!("bad pid {pid}")))?;
        match kill_process_group(group, signal) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(Error::Supervisor(format!(
                "signalling {id} (pid {pid}): {e}"
            ))),
        }
    }

    fn spawn_now(&self, spec: &TaskManagerSpec) -> Result<Option<u32>> {
        check_id(&spec.id)?;
        super::check_sizes(spec)?;
        if self.pid(&spec.id).is_some() {
            return Err(Error::Supervisor(format!(
                "{} still has a process",
                spec.id
            )));
        }
        let paths = self.clusters.get(&spec.cluster).ok_or_else(|| {
            Error::InvalidSpec(format!(
                "cluster {:?} is not in [supervisor.clusters]",
                spec.cluster
            ))
        })?;
        let procs = self.cpu.prepare(&spec.id, spec.cpu_millis)?;
        let argv = command_line(paths, spec, procs.as_deref());
        let log_path = paths.log_dir.join(format!("taskmanager-{}.out", spec.id));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| Error::io(&log_path, e))?;
        let log_err = log.try_clone().map_err(|e| Error::io(&log_path, e))?;
        let mut command = tokio::process::Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .envs(environment(paths, &spec.id))
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Own group: a Ctrl-C to the agent's terminal does not reach the TaskManager, and
            // a group signal reaches any helper the scripts left.
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| Error::io(PathBuf::from(&argv[0]), e))?;
        let pid = child.id();
        if let (Some(pid), Ok(mut live)) = (pid, self.live.lock()) {
            live.insert(spec.id.clone(), pid);
        }
        let id = spec.id.clone();
        let events = self.events.clone();
        let cpu = self.cpu.clone();
        let live = Arc::clone(&self.live);
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => exit_of(status),
                Err(_) => Exit::UnitResult("wait failed".into()),
            };
            if let Ok(mut live) = live.lock()
                && live.get(&id) == pid.as_ref()
            {
                live.remove(&id);
            }
            cpu.remove(&id).await;
            let _ = events.send(Event::Exited { id, pid, exit });
        });
        Ok(pid)
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::UnitResult("unknown".into()),
    }
}

impl Backend for ChildBackend {
    fn spawn<'a>(&'a self, spec: &'a TaskManagerSpec) -> BoxFuture<'a, Result<Option<u32>>> {
        Box::pin(async move { self.spawn_now(spec) })
    }

    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { self.signal(id, Signal::TERM) })
    }

    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { self.signal(id, Signal::KILL) })
    }

    fn outlives_agent(&self) -> bool {
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec(mb: u32, properties: Vec<(String, String)>) -> TaskManagerSpec {
        TaskManagerSpec {
            id: "tm-1".into(),
            cluster: "lab".into(),
            process_memory_mb: mb,
            slots: 2,
            cpu_millis: 1500,
            properties,
        }
    }

    fn paths() -> ClusterPaths {
        ClusterPaths {
            flink_home: "/f".into(),
            conf_dir: "/c".into(),
            log_dir: "/l".into(),
            pid_dir: None,
        }
    }

    fn strings(argv: Vec<OsString>) -> Vec<String> {
        argv.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn command_line_for_a_normal_size() {
        let argv = strings(command_line(
            &paths(),
            &spec(1024, vec![("a.b".into(), "c".into())]),
            None,
        ));
        assert_eq!(
            argv,
            [
                "/f/bin/taskmanager.sh",
                "start-foreground",
                "-D",
                "taskmanager.memory.process.size=1024m",
                "-D",
                "taskmanager.numberOfTaskSlots=2",
                "-D",
                "taskmanager.resource-id=tm-1",
                "-D",
                "a.b=c"
            ]
        );
    }

    #[test]
    fn small_sizes_get_the_measured_overrides_unless_set() {
        let own = (
            "taskmanager.memory.jvm-metaspace.size".to_string(),
            "200m".to_string(),
        );
        let props = dynamic_properties(&spec(640, vec![own.clone()]));
        let keys: Vec<&str> = props.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys[3..],
            [
                "taskmanager.memory.framework.off-heap.size",
                "taskmanager.memory.framework.heap.size",
                "taskmanager.memory.jvm-overhead.min",
                "taskmanager.memory.jvm-metaspace.size"
            ]
        );
        assert_eq!(props.last(), Some(&own));
        assert_eq!(dynamic_properties(&spec(850, vec![])).len(), 3);
    }

    #[test]
    fn cgroup_wrapper_joins_before_exec_and_env_is_per_taskmanager() {
        let argv = strings(command_line(
            &paths(),
            &spec(1024, vec![]),
            Some("/cg/cgroup.procs".as_ref()),
        ));
        assert_eq!(
            argv[..5],
            [
                "/bin/sh",
                "-c",
                r#"echo $$ > "$0" && exec "$@""#,
                "/cg/cgroup.procs",
                "/f/bin/taskmanager.sh"
            ]
        );
        let env = environment(&paths(), "tm-1");
        assert!(env.contains(&("FLINK_IDENT_STRING", "taskmanager-tm-1".into())));
        assert!(env.contains(&("FLINK_PID_DIR", "/l".into())));
    }

    #[test]
    fn zero_sizes_are_refused() {
        assert!(super::super::check_sizes(&spec(0, vec![])).is_err());
        let mut no_slots = spec(1024, vec![]);
        no_slots.slots = 0;
        assert!(super::super::check_sizes(&no_slots).is_err());
        assert!(super::super::check_sizes(&spec(1024, vec![])).is_ok());
    }

    #[test]
    fn ids_must_be_file_name_safe() {
        assert!(check_id("tm-1").is_ok());
        for bad in ["", "../x", "a b", ".hidden", &"x".repeat(65)] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
    }
}

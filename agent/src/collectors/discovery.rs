//! Finds Flink TaskManager JVMs by their main class in `/proc/<pid>/cmdline`.

use std::path::Path;

use super::process::{ProcStatus, parse_status, read_bytes, read_text};
use crate::error::{Error, Result};

/// The main class every Flink TaskManager JVM runs (standalone, YARN and Kubernetes alike).
pub const TASK_MANAGER_MAIN_CLASS: &str = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner";
const RESOURCE_ID_KEY: &str = "taskmanager.resource-id=";

/// What a TaskManager's command line tells.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskManagerCmdline {
    /// `taskmanager.resource-id`, given as a JVM option (`-Dtaskmanager.resource-id=…`) or as a
    /// Flink dynamic property after the main class (`-D taskmanager.resource-id=…`).
    pub resource_id: Option<String>,
}

/// A TaskManager JVM found under the proc root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredJvm {
    pub pid: u32,
    pub resource_id: Option<String>,
    /// From `/proc/<pid>/status`; `None` if it could not be read (hsperfdata then falls back to
    /// the host pid and any owner).
    pub status: Option<ProcStatus>,
}

/// Parses a NUL-separated `/proc/<pid>/cmdline`; `None` unless it is a TaskManager.
///
/// The main class must be a whole argument, so a shell whose `-c` script merely mentions it
/// (`sh -c "exec java … TaskManagerRunner"`) is not mistaken for the JVM.
pub fn parse_cmdline(cmdline: &[u8]) -> Option<TaskManagerCmdline> {
    let mut args = cmdline
        .split(|&b| b == 0)
        .map(|a| std::str::from_utf8(a).unwrap_or(""));
    let mut is_task_manager = false;
    let mut resource_id = None;
    while let Some(arg) = args.next() {
        if arg == TASK_MANAGER_MAIN_CLASS {
            is_task_manager = true;
        } else if let Some(property) = arg.strip_prefix("-D") {
            let property = if property.is_empty() {
                args.next().unwrap_or("")
            } else {
                property
            };
            // Later definitions override earlier ones, as in Flink's own parsing.
            if let Some(id) = property.strip_prefix(RESOURCE_ID_KEY) {
                resource_id = Some(id.to_owned());
            }
        }
    }
    is_task_manager.then_some(TaskManagerCmdline { resource_id })
}

/// Scans `<proc_root>/*/cmdline` for TaskManagers, in pid order. Processes that vanish or
/// cannot be read during the scan are skipped.
pub fn discover(proc_root: &Path) -> Result<Vec<DiscoveredJvm>> {
    let dir = std::fs::read_dir(proc_root).map_err(|e| Error::io(proc_root, e))?;
    let mut cmdline = Vec::new();
    let mut status = String::new();
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        if read_bytes(&path.join("cmdline"), &mut cmdline).is_err() {
            continue;
        }
        let Some(tm) = parse_cmdline(&cmdline) else {
            continue;
        };
        let status = read_text(&path.join("status"), &mut status)
            .and_then(|()| parse_status(&status))
            .inspect_err(|e| tracing::debug!(pid, error = %e, "TaskManager status unreadable"))
            .ok();
        found.push(DiscoveredJvm {
            pid,
            resource_id: tm.resource_id,
            status,
        });
    }
    found.sort_by_key(|j| j.pid);
    Ok(found)
}

//! CPU limits for child-process TaskManagers (local mode): one child cgroup per TaskManager
//! under the agent's own cgroup, so nothing escapes limits set above the agent.
//!
//! - cgroup v2 (unified `/sys/fs/cgroup` with the `cpu` controller): `cpu.max`.
//! - cgroup v1 (a `cpu` hierarchy at `/sys/fs/cgroup/cpu`): `cpu.cfs_quota_us`/`cfs_period_us`.
//! - Otherwise the limit is recorded in the spec but **not enforced**, and the agent says so
//!   once in its log. Memory is never put in a cgroup here: Flink sizes the JVM from
//!   `taskmanager.memory.process.size`, which is a budget, not a hard limit (the systemd backend
//!   adds `MemoryMax=`).
//!
//! The process enters its cgroup before `exec` (a shell writes its own pid to `cgroup.procs`,
//! then execs the TaskManager script), so every thread and helper JVM is inside from the start.

use std::path::{Path, PathBuf};

use tracing::warn;

use crate::error::{Error, Result};

/// The CFS period both cgroup versions are given, in microseconds.
pub const PERIOD_US: u64 = 100_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuLimiter {
    V2 {
        parent: PathBuf,
    },
    V1 {
        parent: PathBuf,
    },
    /// Not enforced, and why.
    Unavailable {
        reason: String,
    },
}

/// The agent's own cgroup path in a hierarchy, from `/proc/self/cgroup` text: `"0::/x"` for
/// v2 (`controller == None`), or the v1 line whose controller list holds `controller`.
pub fn own_cgroup(proc_self_cgroup: &str, controller: Option<&str>) -> Option<String> {
    proc_self_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match controller {
            None => controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        hit.then(|| path.to_string())
    })
}

/// `cpu.max` content for thousandths of a core; 0 means unlimited.
pub fn cpu_max(cpu_millis: u32) -> String {
    match quota_us(cpu_millis) {
        Some(q) => format!("{q} {PERIOD_US}"),
        None => format!("max {PERIOD_US}"),
    }
}

/// Quota per [`PERIOD_US`]: 1000 millis = one core = one full period. The kernel's minimum
/// quota is 1 ms.
pub fn quota_us(cpu_millis: u32) -> Option<u64> {
    (cpu_millis > 0).then(|| (u64::from(cpu_millis) * PERIOD_US / 1000).max(1000))
}

/// The cgroup directory name of a TaskManager.
pub fn dir_name(id: &str) -> String {
    format!("demeter-tm-{id}")
}

impl CpuLimiter {
    /// Looks at what this host allows, under `root` (normally `/sys/fs/cgroup`).
    pub fn detect(root: &Path, proc_self_cgroup: &str) -> Self {
        let join = |base: &Path, own: &str| base.join(own.trim_start_matches('/'));
        let v2_controllers = std::fs::read_to_string(root.join("cgroup.controllers"));
        if let Ok(controllers) = v2_controllers {
            if !controllers.split_whitespace().any(|c| c == "cpu") {
                return Self::unavailable("cgroup v2 without the cpu controller");
            }
            let Some(own) = own_cgroup(proc_self_cgroup, None) else {
                return Self::unavailable("no cgroup v2 entry in /proc/self/cgroup");
            };
            let parent = join(root, &own);
            // Children only get `cpu.max` if the parent delegates the controller; that fails
            // when the parent holds processes itself (the "no internal processes" rule).
            if let Err(e) = std::fs::write(parent.join("cgroup.subtree_control"), "+cpu") {
                return Self::unavailable(&format!(
                    "cannot delegate cpu in {}: {e}",
                    parent.display()
                ));
            }
            return Self::V2 { parent };
        }
        let v1 = root.join("cpu");
        if v1.join("cpu.cfs_quota_us").exists() {
            let Some(own) = own_cgroup(proc_self_cgroup, Some("cpu")) else {
                return Self::unavailable("no cgroup v1 cpu entry in /proc/self/cgroup");
            };
            let parent = join(&v1, &own);
            let probe = parent.join(format!("demeter-probe-{}", std::process::id()));
            return match std::fs::create_dir(&probe).and_then(|()| std::fs::remove_dir(&probe)) {
                Ok(()) => Self::V1 { parent },
                Err(e) => Self::unavailable(&format!("{} not writable: {e}", parent.display())),
            };
        }
        Self::unavailable("no cgroup cpu controller mounted")
    }

    fn unavailable(reason: &str) -> Self {
        warn!(
            reason,
            "CPU limits of child TaskManagers are recorded but NOT enforced"
        );
        Self::Unavailable {
            reason: reason.to_string(),
        }
    }

    /// Creates the TaskManager's cgroup with its limit; the `cgroup.procs` file to join, or
    /// `None` when limits are not enforced.
    pub fn prepare(&self, id: &str, cpu_millis: u32) -> Result<Option<PathBuf>> {
        let (dir, files) = match self {
            Self::Unavailable { .. } => return Ok(None),
            Self::V2 { parent } => (
                parent.join(dir_name(id)),
                vec![("cpu.max", cpu_max(cpu_millis))],
            ),
            Self::V1 { parent } => (
                parent.join(dir_name(id)),
                vec![
                    ("cpu.cfs_period_us", PERIOD_US.to_string()),
                    (
                        "cpu.cfs_quota_us",
                        quota_us(cpu_millis).map_or("-1".to_string(), |q| q.to_string()),
                    ),
                ],
            ),
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(&dir, e)),
        }
        for (file, value) in files {
            let path = dir.join(file);
            std::fs::write(&path, value).map_err(|e| Error::io(&path, e))?;
        }
        Ok(Some(dir.join("cgroup.procs")))
    }

    /// The TaskManager's cgroup directory, if limits are enforced.
    pub fn dir(&self, id: &str) -> Option<PathBuf> {
        match self {
            Self::V2 { parent } | Self::V1 { parent } => Some(parent.join(dir_name(id))),
            Self::Unavailable { .. } => None,
        }
    }

    /// Removes the cgroup; `false` while it still holds processes (e.g. a grandchild that
    /// died with the group but is not reaped yet: rmdir says EBUSY).
    pub fn try_remove(&self, id: &str) -> bool {
        let Some(dir) = self.dir(id) else {
            return true;
        };
        match std::fs::remove_dir(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(_) => false,
        }
    }

    /// Removes the cgroup once its processes are gone, retrying for about two seconds.
    pub async fn remove(&self, id: &str) {
        for _ in 0..20 {
            if self.try_remove(id) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        if let Some(dir) = self.dir(id) {
            warn!(dir = %dir.display(), "TaskManager cgroup still busy; left in place");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const HYBRID: &str = "9:name=systemd:/\n4:memory:/x/y\n2:cpu,cpuacct:/a\n0::/u\n";

    #[test]
    fn own_cgroup_finds_v1_controller_and_v2_lines() {
        assert_eq!(own_cgroup(HYBRID, Some("cpu")).as_deref(), Some("/a"));
        assert_eq!(own_cgroup(HYBRID, Some("cpuacct")).as_deref(), Some("/a"));
        assert_eq!(own_cgroup(HYBRID, None).as_deref(), Some("/u"));
        assert_eq!(own_cgroup("0::/\n", Some("cpu")), None);
    }

    #[test]
    fn quotas_are_thousandths_of_a_core_per_period() {
        assert_eq!(cpu_max(1500), "150000 100000");
        assert_eq!(cpu_max(250), "25000 100000");
        assert_eq!(cpu_max(1), "1000 100000", "kernel minimum");
        assert_eq!(cpu_max(0), "max 100000");
    }

    #[test]
    fn detect_reports_a_missing_controller_and_writes_v1_limits() {
        let root = tempfile::tempdir().unwrap();
        assert!(matches!(
            CpuLimiter::detect(root.path(), HYBRID),
            CpuLimiter::Unavailable { .. }
        ));
        std::fs::create_dir_all(root.path().join("cpu/a")).unwrap();
        std::fs::write(root.path().join("cpu/cpu.cfs_quota_us"), "-1").unwrap();
        let limiter = CpuLimiter::detect(root.path(), HYBRID);
        assert_eq!(
            limiter,
            CpuLimiter::V1 {
                parent: root.path().join("cpu/a")
            }
        );
        let procs = limiter.prepare("tm-1", 500).unwrap().unwrap();
        let dir = root.path().join("cpu/a/demeter-tm-tm-1");
        assert_eq!(procs, dir.join("cgroup.procs"));
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(
            (read("cpu.cfs_quota_us"), read("cpu.cfs_period_us")),
            ("50000".into(), "100000".into())
        );
        // A plain directory with files is not removable like a cgroup; clean it by hand.
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(limiter.try_remove("tm-1"), "gone counts as removed");
    }
}

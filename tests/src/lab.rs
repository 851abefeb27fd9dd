//! A Flink lab (`scripts/flink-lab.sh`) cluster for tests that need real Flink, and the
//! `demeter-coordinator job` CLI run against it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An installed lab; tests skip (printing why) when `DEMETER_LAB` is unset or not installed.
#[derive(Debug)]
pub struct Lab {
    pub script: PathBuf,
    pub dir: PathBuf,
    pub repo: PathBuf,
}

impl Lab {
    pub fn from_env() -> Result<Self, String> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = std::env::var_os("DEMETER_LAB")
            .map(PathBuf::from)
            .ok_or("DEMETER_LAB is not set (no Flink lab to test against)")?;
        if !dir.join("venv/.flink-2.3.0-complete").exists() {
            return Err(format!(
                "Flink is not installed in {} (run scripts/flink-lab.sh install)",
                dir.display()
            ));
        }
        Ok(Self {
            script: repo.join("scripts/flink-lab.sh"),
            dir,
            repo,
        })
    }

    /// REST and RPC ports for a test's cluster: `<prefix>_REST_PORT` / `<prefix>_RPC_PORT` from
    /// the environment, else the defaults (each test has its own, so tests can run side by
    /// side).
    pub fn ports(prefix: &str, rest: u16, rpc: u16) -> (u16, u16) {
        let port = |var: String, default: u16| {
            std::env::var(var)
                .ok()
                .and_then(|p| p.parse().ok())
                .unwrap_or(default)
        };
        (
            port(format!("{prefix}_REST_PORT"), rest),
            port(format!("{prefix}_RPC_PORT"), rpc),
        )
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("bash")
            .arg(&self.script)
            .args(args)
            .env("DEMETER_LAB", &self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "flink-lab.sh {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The benchmark job's jar, built if missing.
    pub fn bench_jar(&self) -> PathBuf {
        let jar = self.dir.join("jobs/demeter-bench.jar");
        if !jar.exists() {
            let status = Command::new("bash")
                .arg(self.repo.join("scripts/build-job.sh"))
                .env("DEMETER_LAB", &self.dir)
                .status()
                .unwrap();
            assert!(status.success(), "build-job.sh failed");
        }
        jar
    }

    /// Starts (JobManager only) and returns the `env` exports; stopped when the guard drops.
    pub fn start(&self, cluster: &str, rest: u16, rpc: u16) -> ClusterGuard<'_> {
        self.start_with(cluster, rest, rpc, &["--taskmanagers", "0"])
    }

    /// Starts with further `flink-lab.sh start` options (e.g. `--taskmanagers 1 --slots 2`).
    pub fn start_with(
        &self,
        cluster: &str,
        rest: u16,
        rpc: u16,
        options: &[&str],
    ) -> ClusterGuard<'_> {
        let (rest, rpc) = (rest.to_string(), rpc.to_string());
        let mut args = vec!["start", cluster, "--rest-port", &rest, "--rpc-port", &rpc];
        args.extend_from_slice(options);
        self.run(&args);
        let env = self
            .run(&["env", cluster])
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches(['"', '\'']).to_string()))
            .collect();
        ClusterGuard {
            lab: self,
            name: cluster.to_string(),
            env,
        }
    }
}

/// Stops the cluster (JobManager and every TaskManager started with its conf dir) on drop,
/// also when the test failed.
#[derive(Debug)]
pub struct ClusterGuard<'a> {
    lab: &'a Lab,
    pub name: String,
    pub env: BTreeMap<String, String>,
}

impl Drop for ClusterGuard<'_> {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.lab.script)
            .args(["stop", &self.name])
            .env("DEMETER_LAB", &self.lab.dir)
            .output();
    }
}

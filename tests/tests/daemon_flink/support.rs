//! The rig of `daemon_flink.rs`: a coordinator daemon and one real agent (child backend) on a
//! lab cluster, the `job` CLI against the daemon, and checks of what the agent runs.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use demeter_agent::supervisor::cgroup::{CpuLimiter, quota_us};
use demeter_common::protocol::Role;
use demeter_common::protocol::jobs::{JobDetails, OperationSummary, OutcomeSummary};
use demeter_coordinator::executor::plan;
use demeter_coordinator::flink::{ClientConfig, FlinkClient, JobId};
use demeter_coordinator::models::space::JobConfig;
use demeter_tests::flink_checks::{UpMonitor, assert_registered_taskmanagers};
use demeter_tests::process::{Daemon, job_cli, start_agent_with, start_coordinator_with};
use demeter_tests::{Pki, Scratch, free_udp_port};
use tokio::io::{AsyncBufReadExt, BufReader};

pub const JOB: &str = "dmnbench";
pub const AGENT: &str = "dmn-node";
/// The Flink cluster name orders carry; the agent maps it to the lab cluster's paths.
const CLUSTER: &str = "dmn";

pub struct Rig {
    pub repo: PathBuf,
    pub scratch: Scratch,
    pub pki: Pki,
    pub port: u16,
    rest: u16,
    pub daemon: Option<Daemon>,
    pub agent: Daemon,
    pub client: Arc<FlinkClient>,
    pub up: UpMonitor,
    pub out: PathBuf,
    jar: PathBuf,
}

fn secs(ms: u64) -> String {
    format!("{:.2}", ms as f64 / 1000.0)
}

impl Rig {
    /// Daemon (armed with `failpoint`) and agent up, the agent connected.
    pub async fn new(
        repo: PathBuf,
        env: &BTreeMap<String, String>,
        jar: PathBuf,
        rest: u16,
        failpoint: &str,
    ) -> Self {
        let scratch = Scratch::new("daemon-flink");
        let pki = Pki::new(&scratch.path.join("pki"));
        pki.issue("operator", Role::Cli);
        pki.issue(AGENT, Role::Agent);
        let port = free_udp_port();
        let client = Arc::new(
            FlinkClient::new(&format!("http://127.0.0.1:{rest}"), ClientConfig::default()).unwrap(),
        );
        let supervisor = format!(
            "[supervisor]\nbackend = \"child\"\nstop_grace_ms = 20000\n\
             [supervisor.clusters.{CLUSTER}]\nflink_home = \"{}\"\nconf_dir = \"{}\"\nlog_dir = \"{}\"\npid_dir = \"{}\"\n",
            env["FLINK_HOME"], env["FLINK_CONF_DIR"], env["FLINK_LOG_DIR"], env["FLINK_PID_DIR"]
        );
        let agent = start_agent_with(&scratch.path, &pki, AGENT, port, 1000, &supervisor);
        let mut rig = Self {
            repo,
            out: scratch.path.join("out"),
            scratch,
            pki,
            port,
            rest,
            daemon: None,
            agent,
            up: UpMonitor::start(client.clone()),
            client,
            jar,
        };
        rig.start_daemon(Some(failpoint)).await;
        rig
    }

    /// Starts the daemon and waits until it has the agent back.
    pub async fn start_daemon(&mut self, failpoint: Option<&str>) {
        let config = format!(
            "[flink]\nrest_url = \"http://127.0.0.1:{}\"\n\
             [executor]\ncluster = \"{CLUSTER}\"\nagents = [\"{AGENT}\"]\nresume_wait_secs = 90\n\
             [executor.watchdog]\ngrace_secs = 5\ninterval_secs = 1\n",
            self.rest
        );
        let env = [("DEMETER_FAILPOINT", failpoint.unwrap_or(""))];
        let log = self.scratch.path.join("coordinator.log");
        let count = || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .matches("agents connected")
                .count()
        };
        let before = count();
        let daemon =
            start_coordinator_with(&self.scratch.path, &self.pki, self.port, &config, &env);
        self.daemon = Some(daemon);
        // After a restart the agent first has to notice its old connection is gone.
        let start = Instant::now();
        while count() <= before {
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "the agent did not connect to the daemon"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn cli(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::from(job_cli(&self.pki, "operator", self.port));
        command.kill_on_drop(true);
        command
    }

    pub async fn register(&self) {
        let out = self
            .cli()
            .args([
                "register",
                "--name",
                JOB,
                "--entry-class",
                "io.demeter.bench.BenchJob",
            ])
            .arg("--jar")
            .arg(&self.jar)
            .args(["--args", "--rate", "400", "--sink", "file", "--output"])
            .arg(format!("file://{}", self.out.display()))
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `job apply` through the daemon; its printed progress and the finished operation.
    pub async fn apply(&self, args: &[&str]) -> (String, OperationSummary) {
        let out = self
            .cli()
            .args(["apply", "--name", JOB])
            .args(args)
            .output()
            .await
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        print!("{printed}");
        assert!(
            out.status.success(),
            "apply {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (printed, self.last_op().await)
    }

    /// Starts `job apply` and returns once its progress shows `line`.
    pub async fn apply_until(&self, args: &[&str], line: &str) -> tokio::process::Child {
        let mut child = self
            .cli()
            .args(["apply", "--name", JOB])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while let Some(text) = lines.next_line().await.unwrap() {
            println!("{text}");
            if text.contains(line) {
                // Keep printing the rest in the background.
                tokio::spawn(async move {
                    while let Ok(Some(text)) = lines.next_line().await {
                        println!("{text}");
                    }
                });
                return child;
            }
        }
        panic!("apply {args:?} ended before printing {line:?}");
    }

    pub async fn show(&self) -> JobDetails {
        let out = self
            .cli()
            .args(["show", JOB, "--json", "--operations", "50"])
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub async fn last_op(&self) -> OperationSummary {
        self.show().await.operations.pop().unwrap()
    }

    /// Polls `job show` until no operation is in flight and `done` holds.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&JobDetails) -> bool) -> JobDetails {
        let start = Instant::now();
        loop {
            let details = self.show().await;
            if details.job.in_flight.is_none() && done(&details) {
                return details;
            }
            assert!(
                start.elapsed() < Duration::from_secs(240),
                "{what}: {details:#?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The configuration and Flink job that run now, as the daemon says.
    pub async fn current(&self) -> (JobConfig, JobId) {
        let current = self.show().await.job.current.unwrap();
        (
            current.config.parse().unwrap(),
            JobId::from(current.flink_job.as_str()),
        )
    }

    /// Waits for the daemon to die by itself; true when by SIGKILL (its failpoint).
    pub async fn daemon_killed_itself(&mut self) -> bool {
        let daemon = self.daemon.as_mut().unwrap();
        let start = Instant::now();
        loop {
            if let Some(status) = daemon.child.as_mut().unwrap().try_wait().unwrap() {
                daemon.child = None;
                return status.signal() == Some(9);
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "daemon did not die"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn restored_from(&self, job: &JobId) -> Option<String> {
        let stats = self.client.checkpoint_stats(job).await.unwrap();
        stats.latest.restored.and_then(|r| r.external_path)
    }

    /// Flink lists exactly the configuration's TaskManagers, each a JVM the agent started (its
    /// descendant) and, where the host allows cgroups, under the configuration's CPU quota.
    pub async fn assert_agent_runs(&self, config: &JobConfig) {
        let specs = plan::taskmanager_specs(JOB, CLUSTER, config);
        assert_registered_taskmanagers(&self.client, &specs).await;
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let limiter = CpuLimiter::detect(std::path::Path::new("/sys/fs/cgroup"), &own);
        for spec in &specs {
            let pids = taskmanager_jvms(&spec.id);
            assert_eq!(pids.len(), 1, "{}: {pids:?}", spec.id);
            assert!(
                descends_from(pids[0], self.agent.pid()),
                "{} (pid {}) is not the agent's",
                spec.id,
                pids[0]
            );
            let Some(dir) = limiter.dir(&spec.id) else {
                println!("CPU limits not enforced on this host: {limiter:?}");
                continue;
            };
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
            assert!(
                procs.lines().any(|p| p == pids[0].to_string()),
                "{}",
                dir.display()
            );
            let quota = std::fs::read_to_string(dir.join("cpu.cfs_quota_us"))
                .or_else(|_| std::fs::read_to_string(dir.join("cpu.max")))
                .unwrap();
            let want = quota_us(spec.cpu_millis).unwrap().to_string();
            assert!(
                quota.starts_with(&want),
                "{}: quota {quota:?}, want {want}",
                spec.id
            );
            println!(
                "{} pid {} in {} quota {}",
                spec.id,
                pids[0],
                dir.display(),
                quota.trim()
            );
        }
        // TaskManagers of other configurations are gone.
        for extra in specs.len()..4 {
            let id = plan::taskmanager_id(JOB, extra as u32);
            assert!(taskmanager_jvms(&id).is_empty(), "{id} still runs");
        }
    }
}

/// Pids whose command line carries `taskmanager.resource-id=<id>`.
fn taskmanager_jvms(id: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let needle = format!("taskmanager.resource-id={id}\0");
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(&needle)
        })
        .collect()
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces, so read after the last ')'.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..16 {
        match parent(pid) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

pub fn applied(op: &OperationSummary) -> (String, String) {
    match &op.outcome {
        Some(OutcomeSummary::Applied { config, flink_job }) => (config.clone(), flink_job.clone()),
        other => panic!("not applied: {other:?}\n{:#?}", op.log),
    }
}

pub fn step_ms(op: &OperationSummary, name: &str) -> u64 {
    op.steps
        .iter()
        .filter(|(s, _)| s == name)
        .map(|(_, ms)| ms)
        .sum()
}

/// Figures printed at the end (milliseconds).
#[derive(Debug, Default)]
pub struct Figures {
    pub rows: Vec<(&'static str, u64)>,
}

impl Figures {
    pub fn add(&mut self, what: &'static str, ms: u64) {
        self.rows.push((what, ms));
    }

    pub fn print(&self) {
        println!("FIGURES (seconds)");
        for (what, ms) in &self.rows {
            println!("  {what:<58} {}", secs(*ms));
        }
    }
}

//! The benchmark job under the `demeter-coordinator job` CLI (local mode), and the checks and
//! figures of `executor_flink.rs`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use demeter_coordinator::executor::driver::now_ms;
use demeter_coordinator::executor::failure::{Drained, Recovery, kill_and_time_recovery};
use demeter_coordinator::executor::journal::Journal;
use demeter_coordinator::executor::taskmanagers::{LocalPaths, LocalTaskManagers};
use demeter_coordinator::executor::{Deployment, Operation, Outcome, Strategy, plan};
use demeter_coordinator::flink::{ClientConfig, FlinkClient, JobId, JobState, VertexId};
use demeter_coordinator::models::space::JobConfig;
use demeter_coordinator::store::Store;
use demeter_tests::flink_checks::{
    UpMonitor, assert_one_running_and_every_stop_saved, assert_registered_taskmanagers,
    stop_and_check_exactly_once,
};
use demeter_tests::lab::{ClusterGuard, Lab};
use demeter_tests::{Scratch, binary};

const WINDOW_VERTEX: &str = "01203aa9a12dc1ec725e03853dd7c8f2";

pub struct Bench {
    repo: PathBuf,
    env: BTreeMap<String, String>,
    jar: PathBuf,
    _scratch: Scratch,
    store: PathBuf,
    out: PathBuf,
    rest: u16,
    pub client: Arc<FlinkClient>,
    up: UpMonitor,
}

impl Bench {
    pub async fn new(lab: &Lab, cluster: &ClusterGuard<'_>, jar: &Path, rest: u16) -> Self {
        let scratch = Scratch::new("executor-flink");
        let client = Arc::new(
            FlinkClient::new(&format!("http://127.0.0.1:{rest}"), ClientConfig::default()).unwrap(),
        );
        let up = UpMonitor::start(client.clone());
        Self {
            repo: lab.repo.clone(),
            env: cluster.env.clone(),
            jar: jar.to_path_buf(),
            store: scratch.path.join("store.redb"),
            out: scratch.path.join("out"),
            _scratch: scratch,
            rest,
            client,
            up,
        }
    }

    pub fn rest_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.rest))
    }

    fn journal(&self) -> Journal {
        Journal::open(Arc::new(Store::open(&self.store).unwrap())).unwrap()
    }

    async fn cli(
        &self,
        args: &[&str],
        rest_url: &str,
        failpoint: Option<&str>,
    ) -> std::process::Output {
        let mut command = tokio::process::Command::new(binary("demeter-coordinator"));
        command.arg("job").args(args);
        for key in ["FLINK_HOME", "FLINK_CONF_DIR", "FLINK_LOG_DIR"] {
            command.env(key, &self.env[key]);
        }
        command
            .env("DEMETER_STORE", &self.store)
            .env("FLINK_REST_URL", rest_url)
            .env("DEMETER_FAILPOINT", failpoint.unwrap_or(""))
            .env("RUST_BACKTRACE", "0");
        let out = command.output().await.unwrap();
        print!("{}", String::from_utf8_lossy(&out.stdout));
        out
    }

    fn direct(&self) -> String {
        format!("http://127.0.0.1:{}", self.rest)
    }

    fn check(out: &std::process::Output, what: &str) {
        assert!(
            out.status.success(),
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn register(&self) {
        let out = std::process::Command::new(binary("demeter-coordinator"))
            .args([
                "job",
                "register",
                "--name",
                "bench",
                "--entry-class",
                "io.demeter.bench.BenchJob",
            ])
            .arg("--jar")
            .arg(&self.jar)
            .env("DEMETER_STORE", &self.store)
            .args(["--args", "--rate", "400", "--sink", "file", "--output"])
            .arg(format!("file://{}", self.out.display()))
            .output()
            .unwrap();
        Self::check(&out, "job register");
    }

    pub async fn apply_via(&self, rest_url: &str, args: &[&str]) -> Operation {
        let mut all = vec!["apply", "--name", "bench"];
        all.extend_from_slice(args);
        let out = self.cli(&all, rest_url, None).await;
        Self::check(&out, &format!("job apply {args:?}"));
        self.last_op()
    }

    pub async fn apply(&self, args: &[&str]) -> Operation {
        self.apply_via(&self.direct(), args).await
    }

    /// Applies and returns the longest time no job was fully running meanwhile.
    pub async fn apply_timed(&self, args: &[&str]) -> (Operation, u64) {
        let t0 = now_ms();
        let op = self.apply(args).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        (op, self.up.longest_down(t0, now_ms()))
    }

    /// `job apply --parallelism <parallelism>`, which must go in place through `steps` and
    /// keep the same job without a savepoint; the deployment and the downtime.
    pub async fn apply_in_place(
        &self,
        parallelism: &str,
        config: &str,
        steps: &[&str],
    ) -> (Deployment, u64) {
        let (op, down) = self.apply_timed(&["--parallelism", parallelism]).await;
        assert_eq!(op.strategy, Strategy::InPlace);
        let d = self.expect_applied(&op, config).await;
        assert_eq!(Some(&d.job_id), op.from.as_ref().map(|f| &f.job_id));
        assert!(op.savepoint.is_none());
        let done: Vec<_> = op.step_durations().into_iter().map(|(s, _)| s).collect();
        assert_eq!(done, steps, "{:#?}", op.log);
        (d, down)
    }

    /// Runs `job apply` with a failpoint; true when it died by SIGKILL.
    pub async fn apply_crashing(&self, args: &[&str], point: &str) -> bool {
        let mut all = vec!["apply", "--name", "bench"];
        all.extend_from_slice(args);
        let out = self.cli(&all, &self.direct(), Some(point)).await;
        out.status.signal() == Some(9)
    }

    pub async fn resume(&self) -> Operation {
        let out = self.cli(&["resume"], &self.direct(), None).await;
        Self::check(&out, "job resume");
        self.last_op()
    }

    pub fn last_op(&self) -> Operation {
        self.journal().operations("bench").unwrap().pop().unwrap()
    }

    pub fn current(&self) -> Deployment {
        self.journal()
            .job("bench")
            .unwrap()
            .unwrap()
            .current
            .unwrap()
    }

    pub async fn expect_applied(&self, op: &Operation, config: &str) -> Deployment {
        let Some(Outcome::Applied(d)) = op.outcome() else {
            panic!("not applied: {:#?}", op.log)
        };
        assert_eq!(d.config, config.parse::<JobConfig>().unwrap());
        assert_eq!(self.state(&d.job_id).await, Some(JobState::Running));
        d.clone()
    }

    pub async fn state(&self, job: &JobId) -> Option<JobState> {
        self.client.job_details(job).await.ok().map(|d| d.state)
    }

    pub async fn restored_from(&self, job: &JobId) -> Option<String> {
        let stats = self.client.checkpoint_stats(job).await.unwrap();
        stats.latest.restored.and_then(|r| r.external_path)
    }

    pub async fn checkpoint_interval_ms(&self, job: &JobId) -> u64 {
        self.client.checkpoint_config(job).await.unwrap().interval as u64
    }

    pub async fn expect_taskmanagers(&self, config: &JobConfig) {
        let specs = plan::taskmanager_specs("bench", "default", config);
        assert_registered_taskmanagers(&self.client, &specs).await;
    }

    /// Exactly the TaskManagers the deployment lists are registered (after a scale-in, the ones
    /// Flink left the job on, whatever their numbers).
    pub async fn expect_deployment_taskmanagers(&self, d: &Deployment) {
        let specs =
            plan::taskmanager_specs_at("bench", "default", &d.config, &d.taskmanager_indices());
        assert_registered_taskmanagers(&self.client, &specs).await;
    }

    pub async fn kill_taskmanager(&self, victim: &str) -> Recovery {
        let current = self.current();
        let local = LocalTaskManagers::new(LocalPaths {
            flink_home: self.env["FLINK_HOME"].clone().into(),
            conf_dir: self.env["FLINK_CONF_DIR"].clone().into(),
            log_dir: self.env["FLINK_LOG_DIR"].clone().into(),
        });
        let specs = plan::taskmanager_specs("bench", "default", &current.config);
        let drained = Drained {
            max_source_backpressure_ms: 100.0,
            metric: Some((
                VertexId::from(WINDOW_VERTEX),
                "window.latencyP95Ms".into(),
                1000.0,
            )),
            polls: 2,
        };
        kill_and_time_recovery(
            &self.client,
            &local,
            "bench",
            &specs,
            &current.job_id,
            victim,
            &drained,
            Duration::from_millis(500),
            Duration::from_secs(180),
        )
        .await
        .unwrap()
    }

    /// Exactly one job runs; every job that ended FINISHED did so with a completed savepoint;
    /// none was cancelled or failed.
    pub async fn assert_one_running_and_every_stop_saved(&self, context: &str) {
        assert_one_running_and_every_stop_saved(&self.client, context, &[]).await
    }

    /// Stops the job with a savepoint and checks its committed output exactly-once.
    pub async fn final_stop_and_check(&self) -> u64 {
        let job = self.current().job_id;
        stop_and_check_exactly_once(&self.client, &job, &self.repo, &self.out).await
    }
}

/// Figures printed at the end (milliseconds).
#[derive(Debug, Default)]
pub struct Figures {
    pub savepoint: Vec<u64>,
    pub restart_downtime: Vec<u64>,
    pub restore: Vec<u64>,
    pub in_place_downtime: Vec<u64>,
    pub scale_out_downtime: Vec<u64>,
    pub rollback: Vec<u64>,
    pub tm_recovery: Vec<u64>,
}

impl Figures {
    pub fn restart(&mut self, op: &Operation, downtime: u64) {
        let steps = op.step_durations();
        let step = |name: &str| {
            steps
                .iter()
                .filter(|(s, _)| s == name)
                .map(|(_, ms)| ms)
                .sum::<u64>()
        };
        self.savepoint.push(step("stop"));
        self.restore.push(step("submit") + step("wait-running"));
        self.restart_downtime.push(downtime);
    }

    pub fn print(&self) {
        let s = |v: &[u64]| {
            v.iter()
                .map(|ms| format!("{:.2}", *ms as f64 / 1000.0))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("FIGURES (seconds)");
        println!(
            "  savepoint (stop-with-savepoint → COMPLETED):  {}",
            s(&self.savepoint)
        );
        println!(
            "  full restart downtime (no job fully running): {}",
            s(&self.restart_downtime)
        );
        println!(
            "  restore (submit from savepoint → RUNNING, records flowing): {}",
            s(&self.restore)
        );
        println!(
            "  in-place rescale downtime:                     {}",
            s(&self.in_place_downtime)
        );
        println!(
            "  in-place scale-out downtime (new TaskManager): {}",
            s(&self.scale_out_downtime)
        );
        println!(
            "  rollback downtime (400m TaskManagers):         {}",
            s(&self.rollback)
        );
        println!(
            "  kill -9 TaskManager → backlog drained:         {}",
            s(&self.tm_recovery)
        );
    }
}

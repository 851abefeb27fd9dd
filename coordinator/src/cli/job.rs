//! `demeter-coordinator job …`: register a Flink job, apply a configuration by hand (with
//! progress while savepoints and restarts run), show and list jobs, resume operations in
//! flight.
//!
//! Two modes. With `--coordinator ADDR` (or `DEMETER_COORDINATOR`) the request goes over QUIC
//! to the running coordinator daemon, which owns the executor: the agents start and stop the
//! TaskManagers, the daemon journals every step, resumes after its own restart and watches
//! the job afterwards. Without it, the executor runs inside this process (local mode, for labs
//! without agents): the TaskManagers are `taskmanager.sh start-foreground` processes of the
//! cluster named by `FLINK_HOME`/`FLINK_CONF_DIR`/`FLINK_LOG_DIR` (what `scripts/flink-lab.sh
//! env NAME` exports), and the store is opened directly (not while a daemon holds it).
//!
//! Failpoints for crash tests (local mode and the daemon): see [`super::failpoint`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use demeter_common::protocol::jobs::{ConfigChange, MAX_SHOW_OPERATIONS};
use demeter_coordinator::executor::driver::{Driver, Observer, now_ms};
use demeter_coordinator::executor::journal::{JobRecord, Journal};
use demeter_coordinator::executor::service::wire;
use demeter_coordinator::executor::taskmanagers::{LocalPaths, LocalTaskManagers};
use demeter_coordinator::executor::{Effect, Operation, Step};
use demeter_coordinator::flink::{ClientConfig, FlinkClient};
use demeter_coordinator::models::space::{SearchSpace, apply_change, parse_change};
use demeter_coordinator::store::Store;

use super::failpoint::Failpoint;
use super::{job_remote, job_render};

#[derive(Debug, Args)]
#[command(
    after_long_help = "Against the daemon (agents run the TaskManagers):\n  \
    demeter-coordinator job --coordinator 10.0.0.1:7443 --ca ca.pem --cert op.pem --key op.key \\\n    \
    apply --name bench --parallelism 4\n\
    Local mode (no --coordinator; TaskManagers are this host's processes):\n  \
    eval \"$(scripts/flink-lab.sh env lab)\"; demeter-coordinator job --store lab.redb apply --name bench --parallelism 4"
)]
pub struct JobArgs {
    #[command(flatten)]
    env: JobEnv,
    #[command(flatten)]
    remote: RemoteArgs,
    #[command(subcommand)]
    command: JobCommand,
}

/// Where the daemon is, and the `cli` certificate to talk to it with.
#[derive(Debug, Args)]
pub(super) struct RemoteArgs {
    /// The running coordinator daemon's QUIC address. Given: the daemon carries the request
    /// out (its agents run the TaskManagers). Not given: local mode, the executor runs here.
    #[arg(long, global = true, env = "DEMETER_COORDINATOR")]
    pub coordinator: Option<SocketAddr>,
    /// The name in the coordinator's certificate.
    #[arg(long, global = true, default_value = "coordinator")]
    pub server_name: String,
    /// The cluster CA certificate (with --coordinator).
    #[arg(long, global = true, env = "DEMETER_CA")]
    pub ca: Option<PathBuf>,
    /// A certificate with role `cli` (`certs issue --role cli`).
    #[arg(long, global = true, env = "DEMETER_CERT")]
    pub cert: Option<PathBuf>,
    /// Its private key.
    #[arg(long, global = true, env = "DEMETER_KEY")]
    pub key: Option<PathBuf>,
}

/// Local mode: where the store, Flink and the local TaskManagers are.
#[derive(Debug, Args)]
struct JobEnv {
    /// Local mode: the store (redb file) holding jobs and operations.
    #[arg(
        long,
        global = true,
        env = "DEMETER_STORE",
        default_value = "/var/lib/demeter/coordinator.redb"
    )]
    store: PathBuf,
    /// The JobManager's REST API.
    #[arg(
        long,
        global = true,
        env = "FLINK_REST_URL",
        default_value = "http://127.0.0.1:8081"
    )]
    flink_rest: String,
    /// Flink installation whose `bin/taskmanager.sh` starts local TaskManagers.
    #[arg(long, global = true, env = "FLINK_HOME")]
    flink_home: Option<PathBuf>,
    /// The cluster's configuration directory.
    #[arg(long, global = true, env = "FLINK_CONF_DIR")]
    flink_conf_dir: Option<PathBuf>,
    /// Where local TaskManagers log.
    #[arg(long, global = true, env = "FLINK_LOG_DIR")]
    flink_log_dir: Option<PathBuf>,
    /// Cluster name carried in TaskManager specs.
    #[arg(long, global = true, default_value = "default")]
    cluster: String,
}

#[derive(Debug, Subcommand)]
pub(super) enum JobCommand {
    /// Register a job (or update how it is submitted; what runs is kept).
    Register(RegisterArgs),
    /// Reconfigure a job (or deploy it the first time); unset values keep the current ones.
    Apply(ApplyArgs),
    /// A job's configuration, operation in flight and history.
    Show {
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The newest operations shown.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_SHOW_OPERATIONS)))]
        operations: u32,
    },
    /// Every registered job and what it runs.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Local mode: resume, or roll back, every operation a previous run left in flight (the
    /// daemon does this by itself when it starts).
    Resume,
    /// Daemon only: a tuned job's live reading, forecast and newest decisions with their
    /// reasons (why it profiled, why it moved, what it expected).
    Tuning {
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The newest decisions shown.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=i64::from(demeter_common::protocol::tuning::MAX_DECISIONS)))]
        last: u32,
        /// Refresh every this many seconds until interrupted (a live view).
        #[arg(long)]
        watch: Option<u64>,
    },
}

#[derive(Debug, Args)]
pub(super) struct RegisterArgs {
    /// The job's name in Demeter: letters, digits, '_', '.', '-' (it names its TaskManagers,
    /// `<name>-tm<i>`, and its `[[tuning.jobs]]` entry).
    #[arg(long)]
    pub name: String,
    /// The job's jar (uploaded to Flink at the first submission of each run); with
    /// --coordinator, a path on the coordinator's host.
    #[arg(long)]
    pub jar: PathBuf,
    /// The job's main class, e.g. `io.demeter.bench.BenchJob`.
    #[arg(long)]
    pub entry_class: String,
    /// End-to-end latency objective, ms.
    #[arg(long)]
    pub qos_latency_ms: Option<u64>,
    /// Recovery-time objective, s.
    #[arg(long)]
    pub qos_recovery_s: Option<u64>,
    /// Search space (TOML, see `model` commands).
    #[arg(long)]
    pub space: Option<PathBuf>,
    /// `file:///…` directory for savepoints (default: the cluster's).
    #[arg(long)]
    pub savepoint_dir: Option<String>,
    /// Program arguments; everything after `--args` (put it last).
    #[arg(long, num_args = 1.., allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Debug, Args)]
pub(super) struct ApplyArgs {
    /// The registered job.
    #[arg(long)]
    pub name: String,
    /// Parallelism of every operator.
    #[arg(long)]
    parallelism: Option<u32>,
    /// TaskManager process memory, e.g. `1536m` or `2g`.
    #[arg(long)]
    tm_memory: Option<String>,
    /// Task slots per TaskManager.
    #[arg(long)]
    slots: Option<u32>,
    /// CPU cores per TaskManager, e.g. `1.0`.
    #[arg(long)]
    tm_cpu: Option<String>,
    /// Checkpoint interval, e.g. `20s`.
    #[arg(long)]
    checkpoint_interval: Option<String>,
    /// With --coordinator: the daemon refuses to start the operation if the request reaches
    /// it later than this many seconds from now.
    #[arg(long, default_value_t = 60)]
    pub start_within: u64,
}

impl ApplyArgs {
    /// The values given; the others keep the job's current ones.
    pub fn change(&self) -> anyhow::Result<ConfigChange> {
        let given = [
            ("p", self.parallelism.map(|v| v.to_string())),
            ("slots", self.slots.map(|v| v.to_string())),
            ("mem", self.tm_memory.clone()),
            ("cpu", self.tm_cpu.clone()),
            ("ckpt", self.checkpoint_interval.clone()),
        ];
        let text: Vec<String> = given
            .into_iter()
            .filter_map(|(key, value)| value.map(|v| format!("{key}={v}")))
            .collect();
        if text.is_empty() {
            bail!(
                "nothing to apply: give at least one of --parallelism, --slots, --tm-memory, --tm-cpu, --checkpoint-interval"
            );
        }
        Ok(parse_change(&text.join(","))?)
    }
}

/// The search space file's text, checked here so a mistake is reported before anything is
/// registered.
pub(super) fn read_space(path: Option<&PathBuf>) -> anyhow::Result<Option<(String, SearchSpace)>> {
    let Some(path) = path else { return Ok(None) };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let space = SearchSpace::from_toml(&text)?;
    Ok(Some((text, space)))
}

pub fn run(args: JobArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match args.remote.coordinator {
        Some(_) => runtime.block_on(job_remote::dispatch(&args.remote, args.command)),
        None => runtime.block_on(dispatch(args)),
    }
}

fn journal(env: &JobEnv) -> anyhow::Result<Journal> {
    let store =
        Store::open(&env.store).with_context(|| format!("opening {}", env.store.display()))?;
    Ok(Journal::open(Arc::new(store))?)
}

fn driver(env: &JobEnv, journal: Journal) -> anyhow::Result<Driver> {
    let paths = match (&env.flink_home, &env.flink_conf_dir, &env.flink_log_dir) {
        (Some(home), Some(conf), Some(log)) => LocalPaths {
            flink_home: home.clone(),
            conf_dir: conf.clone(),
            log_dir: log.clone(),
        },
        _ => bail!(
            "local TaskManagers need FLINK_HOME, FLINK_CONF_DIR and FLINK_LOG_DIR (eval \"$(scripts/flink-lab.sh env NAME)\")"
        ),
    };
    let client = FlinkClient::new(&env.flink_rest, ClientConfig::default())?;
    let mut driver = Driver::new(
        Arc::new(client),
        Arc::new(LocalTaskManagers::new(paths)),
        journal,
        &env.cluster,
    );
    driver.observer = Arc::new(Progress::from_env());
    Ok(driver)
}

async fn dispatch(args: JobArgs) -> anyhow::Result<()> {
    let env = args.env;
    let journal = journal(&env)?;
    match args.command {
        JobCommand::Register(r) => {
            let record = journal.register(&JobRecord {
                space: read_space(r.space.as_ref())?.map(|(_, space)| space),
                name: r.name,
                jar: std::path::absolute(&r.jar).unwrap_or(r.jar),
                entry_class: r.entry_class,
                args: r.args,
                qos_latency_ms: r.qos_latency_ms,
                qos_recovery_s: r.qos_recovery_s,
                savepoint_dir: r.savepoint_dir,
                current: None,
                registered_ms: now_ms(),
            })?;
            job_render::registered(&wire::job(&record, None, None));
        }
        JobCommand::Apply(a) => {
            let job = journal
                .job(&a.name)?
                .with_context(|| format!("no registered job {}", a.name))?;
            let current = job.current.as_ref().map(|d| d.config);
            let to = apply_change(&a.change()?, current.as_ref())?;
            let op = driver(&env, journal)?.apply(&a.name, to).await?;
            report(&op)?;
        }
        JobCommand::Show {
            name,
            json,
            operations,
        } => {
            let job = journal
                .job(&name)?
                .with_context(|| format!("no registered job {name}"))?;
            let in_flight = journal.in_flight()?.into_iter().find(|o| o.job == name);
            let summary = wire::job(&job, in_flight.map(|o| o.id), None);
            let ops = journal.operations(&name)?;
            job_render::details(&wire::details(summary, &ops, operations), json)?;
        }
        JobCommand::List { json } => {
            let in_flight = journal.in_flight()?;
            let jobs: Vec<_> = journal
                .jobs()?
                .iter()
                .map(|j| {
                    let op = in_flight.iter().find(|o| o.job == j.name).map(|o| o.id);
                    wire::job(j, op, None)
                })
                .collect();
            job_render::list(&jobs, json)?;
        }
        JobCommand::Tuning { .. } => bail!(
            "tuning runs in the coordinator daemon: give --coordinator (and --ca/--cert/--key)"
        ),
        JobCommand::Resume => {
            if journal.in_flight()?.is_empty() {
                println!("no operation in flight");
                return Ok(());
            }
            for op in driver(&env, journal)?.resume_all().await? {
                report(&op)?;
            }
        }
    }
    Ok(())
}

fn report(op: &Operation) -> anyhow::Result<()> {
    match op.outcome() {
        Some(outcome) => job_render::outcome(&op.job, &wire::outcome(outcome)),
        None => bail!("operation {} did not finish", op.id),
    }
}

/// Prints the operation's progress as it is journaled (the same lines the daemon streams),
/// and fires the `DEMETER_FAILPOINT` crash when its point is reached.
#[derive(Debug)]
struct Progress {
    progress: Mutex<wire::Progress>,
    failpoint: Failpoint,
}

impl Progress {
    fn from_env() -> Self {
        Self {
            progress: Mutex::new(wire::Progress::default()),
            failpoint: Failpoint::from_env(),
        }
    }
}

impl Observer for Progress {
    fn journaled(&self, op: &Operation, finished: Option<Step>) {
        if let Ok(mut progress) = self.progress.lock() {
            for event in progress.events(op, finished) {
                job_render::progress(&event);
            }
        }
        self.failpoint.journaled(op, finished);
    }

    fn effect_done(&self, op: &Operation, effect: &Effect) {
        self.failpoint.effect_done(op, effect);
    }
}

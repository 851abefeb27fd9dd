//! `demeter-coordinator job …`: register a Flink job, apply a configuration by hand (with
//! progress while savepoints and restarts run), show a job, resume operations in flight.
//!
//! Without agents the TaskManagers run on this host as `taskmanager.sh start-foreground`
//! processes of the cluster named by `FLINK_HOME`/`FLINK_CONF_DIR`/`FLINK_LOG_DIR` (what
//! `scripts/flink-lab.sh env NAME` exports).
//!
//! Failpoint for crash tests: `DEMETER_FAILPOINT=after-step:<step>` kills this process with
//! SIGKILL right after the journal recorded `<step>` as done; `in-step:<step>` right after the
//! step's first action was carried out, before its answer is journaled. Steps: stop,
//! resolve-stop, taskmanagers, wait-taskmanagers, submit, wait-running, rescale, stop-new,
//! cancel-new, restore-point.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use demeter_coordinator::executor::driver::{Driver, Observer, now_ms};
use demeter_coordinator::executor::journal::{JobRecord, Journal};
use demeter_coordinator::executor::taskmanagers::{LocalPaths, LocalTaskManagers};
use demeter_coordinator::executor::{Effect, Operation, Outcome, Phase, Step};
use demeter_coordinator::flink::{ClientConfig, FlinkClient};
use demeter_coordinator::models::space::{JobConfig, SearchSpace};
use demeter_coordinator::store::Store;

#[derive(Debug, Args)]
pub struct JobArgs {
    #[command(flatten)]
    env: JobEnv,
    #[command(subcommand)]
    command: JobCommand,
}

/// Where the store, Flink and the local TaskManagers are.
#[derive(Debug, Args)]
struct JobEnv {
    /// The coordinator's store (redb file) holding jobs and operations.
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
enum JobCommand {
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
    },
    /// Resume, or roll back, every operation a previous run left in flight.
    Resume,
}

#[derive(Debug, Args)]
struct RegisterArgs {
    #[arg(long)]
    name: String,
    /// The job's jar (uploaded to Flink at the first submission of each run).
    #[arg(long)]
    jar: PathBuf,
    #[arg(long)]
    entry_class: String,
    /// End-to-end latency objective, ms.
    #[arg(long)]
    qos_latency_ms: Option<u64>,
    /// Recovery-time objective, s.
    #[arg(long)]
    qos_recovery_s: Option<u64>,
    /// Search space (TOML, see `model` commands).
    #[arg(long)]
    space: Option<PathBuf>,
    /// `file:///…` directory for savepoints (default: the cluster's).
    #[arg(long)]
    savepoint_dir: Option<String>,
    /// Program arguments; everything after `--args` (put it last).
    #[arg(long, num_args = 1.., allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Debug, Args)]
struct ApplyArgs {
    #[arg(long)]
    name: String,
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
}

pub fn run(args: JobArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(dispatch(args))
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
            let space = match &r.space {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    Some(SearchSpace::from_toml(&text)?)
                }
                None => None,
            };
            let record = journal.register(&JobRecord {
                name: r.name,
                jar: std::path::absolute(&r.jar).unwrap_or(r.jar),
                entry_class: r.entry_class,
                args: r.args,
                qos_latency_ms: r.qos_latency_ms,
                qos_recovery_s: r.qos_recovery_s,
                space,
                savepoint_dir: r.savepoint_dir,
                current: None,
                registered_ms: now_ms(),
            })?;
            println!(
                "registered {} ({})",
                record.name,
                record.current.map_or("not running".into(), |d| format!(
                    "runs {} as {}",
                    d.config, d.job_id
                ))
            );
        }
        JobCommand::Apply(a) => {
            let job = journal
                .job(&a.name)?
                .with_context(|| format!("no registered job {}", a.name))?;
            let to = target(&a, job.current.as_ref().map(|d| d.config))?;
            let op = driver(&env, journal)?.apply(&a.name, to).await?;
            report(&op)?;
        }
        JobCommand::Show { name, json } => show(&journal, &name, json)?,
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

/// The configuration to apply: given values over the current ones.
fn target(a: &ApplyArgs, current: Option<JobConfig>) -> anyhow::Result<JobConfig> {
    let cur = current;
    let pick = |given: Option<String>, now: Option<String>, name: &str| {
        given
            .or(now)
            .with_context(|| format!("--{name} is needed: the job does not run yet"))
    };
    let text = format!(
        "p={},slots={},mem={},cpu={},ckpt={}",
        pick(
            a.parallelism.map(|v| v.to_string()),
            cur.map(|c| c.parallelism.to_string()),
            "parallelism"
        )?,
        pick(
            a.slots.map(|v| v.to_string()),
            cur.map(|c| c.slots_per_tm.to_string()),
            "slots"
        )?,
        pick(
            a.tm_memory.clone(),
            cur.map(|c| format!("{}m", c.tm_memory_mb)),
            "tm-memory"
        )?,
        pick(
            a.tm_cpu.clone(),
            cur.map(|c| c.tm_cpu_cores().to_string()),
            "tm-cpu"
        )?,
        pick(
            a.checkpoint_interval.clone(),
            cur.map(|c| c.checkpoint_interval_s.to_string()),
            "checkpoint-interval"
        )?,
    );
    Ok(text.parse()?)
}

fn report(op: &Operation) -> anyhow::Result<()> {
    match op.outcome() {
        Some(Outcome::Applied(d)) => {
            println!("applied: {} runs {} as job {}", op.job, d.config, d.job_id)
        }
        Some(Outcome::RolledBack { deployment, reason }) => {
            println!(
                "rolled back ({reason}): {} runs {} as job {}",
                op.job, deployment.config, deployment.job_id
            )
        }
        Some(Outcome::Aborted { reason }) => println!("aborted, nothing changed: {reason}"),
        Some(Outcome::NotStarted { reason }) => bail!("{} did not start: {reason}", op.job),
        None => bail!("operation {} did not finish", op.id),
    }
    Ok(())
}

fn show(journal: &Journal, name: &str, json: bool) -> anyhow::Result<()> {
    let job = journal
        .job(name)?
        .with_context(|| format!("no registered job {name}"))?;
    let ops = journal.operations(name)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"job": job, "operations": ops}))?
        );
        return Ok(());
    }
    println!(
        "job {}: {} {} {}",
        job.name,
        job.jar.display(),
        job.entry_class,
        job.args.join(" ")
    );
    match &job.current {
        Some(d) => println!("runs {} as Flink job {}", d.config, d.job_id),
        None => println!("not running"),
    }
    for op in ops {
        let state = match &op.phase {
            Phase::Finished(o) => format!("{o:?}"),
            Phase::Forward => format!("IN FLIGHT at {}", op.step.name()),
            Phase::RollingBack { attempt, .. } => format!(
                "IN FLIGHT, rollback attempt {attempt} at {}",
                op.step.name()
            ),
        };
        println!(
            "\noperation {} ({:?} → {}): {state}",
            op.id, op.strategy, op.to
        );
        for line in &op.log {
            println!(
                "  [{:7.1}s] {}",
                line.at_ms.saturating_sub(op.started_ms) as f64 / 1000.0,
                line.text
            );
        }
    }
    Ok(())
}

/// Prints each new history line with its time since the operation started, and fires the
/// `DEMETER_FAILPOINT` crash when its point is reached.
#[derive(Debug)]
struct Progress {
    printed: Mutex<(u64, usize)>,
    failpoint: Option<String>,
}

impl Progress {
    fn from_env() -> Self {
        Self {
            printed: Mutex::new((0, 0)),
            failpoint: std::env::var("DEMETER_FAILPOINT")
                .ok()
                .filter(|f| !f.is_empty()),
        }
    }

    fn crash_if(&self, point: &str) {
        if self.failpoint.as_deref() == Some(point) {
            eprintln!("failpoint {point}: SIGKILL");
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    }
}

impl Observer for Progress {
    fn journaled(&self, op: &Operation, finished: Option<Step>) {
        if let Ok(mut printed) = self.printed.lock() {
            if printed.0 != op.id {
                *printed = (op.id, 0);
            }
            for line in op.log.iter().skip(printed.1) {
                println!(
                    "[{:7.1}s] {}",
                    line.at_ms.saturating_sub(op.started_ms) as f64 / 1000.0,
                    line.text
                );
            }
            printed.1 = op.log.len();
        }
        if let Some(step) = finished {
            self.crash_if(&format!("after-step:{}", step.name()));
        }
    }

    fn effect_done(&self, op: &Operation, _effect: &Effect) {
        self.crash_if(&format!("in-step:{}", op.step.name()));
    }
}

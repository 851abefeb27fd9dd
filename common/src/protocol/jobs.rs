//! Job requests a CLI peer sends the coordinator daemon, and the daemon's answers.
//!
//! One request at a time on the CLI's control stream. `Register`, `Show` and `List` get one
//! answer; `Apply` gets [`JobReply::Started`], then [`JobReply::Progress`] events while the
//! operation runs, then [`JobReply::Finished`] — or a single [`JobReply::Refused`] when it was
//! not started. The operation belongs to the daemon: a CLI that goes away does not stop it.
//!
//! Configurations travel as numbers (MiB, thousandths of a core, seconds); the summaries the
//! daemon sends back carry them as display text (`p=2,slots=2,mem=1024m,cpu=1,ckpt=5s`), so the
//! CLI needs no knowledge of the coordinator's types. Every enum here is appended to only:
//! bincode numbers variants by position.

use serde::{Deserialize, Serialize};

/// Job names become TaskManager ids (`<job>-tm<i>`), file and cgroup names: `[A-Za-z0-9_.-]`,
/// short enough for the agents' 64-character id limit with the suffix.
pub const MAX_JOB_NAME: usize = 48;
/// Longest path (jar, savepoint directory) accepted.
pub const MAX_PATH: usize = 4096;
pub const MAX_ENTRY_CLASS: usize = 512;
pub const MAX_ARGS: usize = 256;
pub const MAX_ARG: usize = 4096;
/// All program arguments together.
pub const MAX_ARGS_TOTAL: usize = 64 * 1024;
/// A search space in TOML.
pub const MAX_SPACE_TOML: usize = 64 * 1024;
/// Most operations one `Show` returns (newest first are kept).
pub const MAX_SHOW_OPERATIONS: u32 = 50;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobRequest {
    /// Register a job or update how it is submitted; what runs is kept.
    Register(JobRegistration),
    /// Reconfigure a job (or deploy it the first time).
    Apply(JobApply),
    /// One job with its newest `operations` operations.
    Show { job: String, operations: u32 },
    /// Every registered job.
    List,
    /// A tuned job's live view and its newest `last` decisions.
    Tuning { job: String, last: u32 },
}

/// How to submit a job. Paths are on the coordinator's host: the daemon uploads the jar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRegistration {
    pub name: String,
    pub jar: String,
    pub entry_class: String,
    pub args: Vec<String>,
    pub qos_latency_ms: Option<u64>,
    pub qos_recovery_s: Option<u64>,
    /// The search space as TOML text.
    pub space_toml: Option<String>,
    /// `file:///…` directory for savepoints; `None` uses the cluster's default.
    pub savepoint_dir: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobApply {
    pub job: String,
    /// Values to change; unset ones keep the job's current values.
    pub change: ConfigChange,
    /// Milliseconds since the Unix epoch after which the daemon must not start the operation
    /// (a request that waited too long is refused, not carried out late).
    pub deadline_ms: u64,
}

/// A partial configuration: what an apply changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigChange {
    pub parallelism: Option<u32>,
    pub slots: Option<u32>,
    pub tm_memory_mb: Option<u32>,
    /// Thousandths of a core per TaskManager.
    pub tm_cpu_millis: Option<u32>,
    pub checkpoint_interval_s: Option<u32>,
}

impl ConfigChange {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobReply {
    Registered(JobSummary),
    /// The apply was admitted; its operation is journaled and running.
    Started(OperationStarted),
    Progress(ProgressEvent),
    Finished(OperationEnd),
    Jobs(Vec<JobSummary>),
    Details(JobDetails),
    /// Not done, nothing changed: invalid input, unknown job, another operation of the job in
    /// flight, agents missing, a passed deadline, or no executor in this coordinator.
    Refused(String),
    /// The operation started but the daemon could not carry it to an end (e.g. its journal
    /// failed); it stays in flight at its last durable step and is resumed at the next start.
    Failed(String),
    /// Boxed: the live line and its totals outweigh every other reply.
    Tuning(Box<super::tuning::TuningView>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationStarted {
    pub op: u64,
    pub job: String,
    /// `Initial`, `InPlace`, `Restart` or `Recover`.
    pub strategy: String,
    pub from: Option<String>,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressEvent {
    pub op: u64,
    /// Since the operation started.
    pub elapsed_ms: u64,
    pub kind: ProgressKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ProgressKind {
    /// The operation entered a step (`stop`, `taskmanagers`, `submit`, … as in `job show`).
    StepStarted {
        step: String,
    },
    StepFinished {
        step: String,
        took_ms: u64,
    },
    /// A line of the operation's history, as `job show` prints it.
    Note(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationEnd {
    pub op: u64,
    pub job: String,
    pub elapsed_ms: u64,
    pub outcome: OutcomeSummary,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OutcomeSummary {
    /// The job runs in the new configuration.
    Applied { config: String, flink_job: String },
    /// The new configuration failed; the job runs in the old one again.
    RolledBack {
        config: String,
        flink_job: String,
        reason: String,
    },
    /// Nothing was changed: the old job never stopped.
    Aborted { reason: String },
    /// A first deployment that did not come up.
    NotStarted { reason: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSummary {
    pub name: String,
    pub jar: String,
    pub entry_class: String,
    pub args: Vec<String>,
    /// What runs now, if anything was deployed.
    pub current: Option<DeploymentSummary>,
    /// Flink's state of the current job, when the daemon could ask.
    pub flink_state: Option<String>,
    /// The operation in flight, if any.
    pub in_flight: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentSummary {
    pub config: String,
    pub flink_job: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationSummary {
    pub id: u64,
    pub strategy: String,
    pub from: Option<String>,
    pub to: String,
    /// `Finished: …` or `IN FLIGHT …`, as `job show` prints it.
    pub state: String,
    pub finished: bool,
    pub outcome: Option<OutcomeSummary>,
    pub step: String,
    pub started_ms: u64,
    /// (ms since the operation started, text) per history line.
    pub log: Vec<(u64, String)>,
    /// (step, ms) per finished step, in order.
    pub steps: Vec<(String, u64)>,
    /// The savepoint the operation's stop completed (full restarts).
    pub savepoint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobDetails {
    pub job: JobSummary,
    /// Oldest first; the newest ones when there are more than asked or than fit in a frame.
    pub operations: Vec<OperationSummary>,
    /// Operations left out.
    pub omitted: u32,
}

/// A job name that is safe as an id, a file and a cgroup name.
pub fn check_job_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_JOB_NAME {
        return Err(format!(
            "job name must have 1 to {MAX_JOB_NAME} characters, not {}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "job name {name:?} has {c:?}; use letters, digits, '_', '.', '-'"
        ));
    }
    Ok(())
}

fn check_len(what: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!("{what} is {} bytes; at most {max}", text.len()));
    }
    Ok(())
}

impl JobRequest {
    /// Structural checks both sides make: the CLI before sending, the daemon on receipt (a
    /// hostile or buggy peer). Semantic checks (does the job exist, is it busy) are the
    /// daemon's.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Self::Register(r) => r.validate(),
            Self::Apply(a) => {
                check_job_name(&a.job)?;
                if a.change.is_empty() {
                    return Err("nothing to change: give at least one value".into());
                }
                Ok(())
            }
            Self::Show { job, operations } => {
                check_job_name(job)?;
                if *operations > MAX_SHOW_OPERATIONS {
                    return Err(format!(
                        "at most {MAX_SHOW_OPERATIONS} operations per show, not {operations}"
                    ));
                }
                Ok(())
            }
            Self::List => Ok(()),
            Self::Tuning { job, last } => {
                check_job_name(job)?;
                if *last > super::tuning::MAX_DECISIONS {
                    return Err(format!(
                        "at most {} decisions per answer, not {last}",
                        super::tuning::MAX_DECISIONS
                    ));
                }
                Ok(())
            }
        }
    }
}

impl JobRegistration {
    pub fn validate(&self) -> Result<(), String> {
        check_job_name(&self.name)?;
        check_len("the jar path", &self.jar, MAX_PATH)?;
        if !self.jar.starts_with('/') {
            return Err(format!(
                "the jar path {:?} must be absolute (on the coordinator's host)",
                self.jar
            ));
        }
        check_len("the entry class", &self.entry_class, MAX_ENTRY_CLASS)?;
        if self.entry_class.is_empty()
            || !self
                .entry_class
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '$'))
        {
            return Err(format!(
                "entry class {:?} is not a Java class name",
                self.entry_class
            ));
        }
        if self.args.len() > MAX_ARGS {
            return Err(format!(
                "{} program arguments; at most {MAX_ARGS}",
                self.args.len()
            ));
        }
        for arg in &self.args {
            check_len("a program argument", arg, MAX_ARG)?;
        }
        let total: usize = self.args.iter().map(String::len).sum();
        check_len_total(total)?;
        if let Some(space) = &self.space_toml {
            check_len("the search space", space, MAX_SPACE_TOML)?;
        }
        if let Some(dir) = &self.savepoint_dir {
            check_len("the savepoint directory", dir, MAX_PATH)?;
            if !dir.contains("://") {
                return Err(format!(
                    "savepoint directory {dir:?} needs a scheme, e.g. file:///…"
                ));
            }
        }
        Ok(())
    }
}

fn check_len_total(total: usize) -> Result<(), String> {
    if total > MAX_ARGS_TOTAL {
        return Err(format!(
            "program arguments total {total} bytes; at most {MAX_ARGS_TOTAL}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration() -> JobRegistration {
        JobRegistration {
            name: "bench".into(),
            jar: "/opt/jobs/bench.jar".into(),
            entry_class: "io.demeter.bench.BenchJob".into(),
            args: vec!["--rate".into(), "400".into()],
            qos_latency_ms: Some(500),
            qos_recovery_s: None,
            space_toml: None,
            savepoint_dir: Some("file:///var/lib/flink/savepoints".into()),
        }
    }

    #[test]
    fn names_are_ids() {
        assert!(check_job_name("bench-1.a_b").is_ok());
        for bad in ["", "a b", "../x", "x/y", "é", &"x".repeat(MAX_JOB_NAME + 1)] {
            assert!(check_job_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn registrations_are_bounded_and_well_formed() {
        assert_eq!(registration().validate(), Ok(()));
        type Break = fn(&mut JobRegistration);
        let cases: [(&str, Break); 7] = [
            ("relative jar", |r| r.jar = "bench.jar".into()),
            ("huge jar path", |r| {
                r.jar = format!("/{}", "a".repeat(MAX_PATH))
            }),
            ("class", |r| r.entry_class = "io.Bench; rm -rf".into()),
            ("too many args", |r| r.args = vec!["x".into(); MAX_ARGS + 1]),
            ("one huge arg", |r| r.args = vec!["x".repeat(MAX_ARG + 1)]),
            ("args total", |r| {
                r.args = vec!["x".repeat(MAX_ARG); MAX_ARGS]
            }),
            ("no scheme", |r| r.savepoint_dir = Some("/tmp/sp".into())),
        ];
        for (what, break_it) in cases {
            let mut r = registration();
            break_it(&mut r);
            let err = JobRequest::Register(r).validate();
            assert!(err.is_err(), "{what} passed");
        }
    }

    #[test]
    fn an_apply_must_change_something_and_show_is_capped() {
        let apply = |change| {
            JobRequest::Apply(JobApply {
                job: "bench".into(),
                change,
                deadline_ms: 1,
            })
            .validate()
        };
        assert!(apply(ConfigChange::default()).is_err());
        assert!(
            apply(ConfigChange {
                parallelism: Some(2),
                ..ConfigChange::default()
            })
            .is_ok()
        );
        let show = |operations| {
            JobRequest::Show {
                job: "bench".into(),
                operations,
            }
            .validate()
        };
        assert!(show(MAX_SHOW_OPERATIONS).is_ok());
        assert!(show(MAX_SHOW_OPERATIONS + 1).is_err());
    }
}

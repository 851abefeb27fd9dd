//! Whether the daemon starts an operation: one operation per job at a time, a target
//! configuration that makes sense, and the agents that would run its TaskManagers connected.
//! Pure: the caller passes the registration, the connected agents and the time.

use std::collections::BTreeMap;

use demeter_common::protocol::jobs::JobApply;

use super::super::journal::JobRecord;
use crate::models::space::{JobConfig, apply_change};

/// What keeps a job busy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Busy {
    /// An apply a CLI asked for.
    Apply,
    /// An operation a previous coordinator left in flight (resumed, or waiting for its agents).
    Resume { op: u64 },
    /// The watchdog bringing the stopped job back.
    Recover,
    /// A reconfiguration the job's tuning policy ordered.
    Tune,
}

impl Busy {
    fn describe(&self) -> String {
        match self {
            Self::Apply => "an apply is in flight".into(),
            Self::Resume { op } => format!("operation {op} left in flight is being resumed"),
            Self::Recover => "the watchdog is restarting the stopped job".into(),
            Self::Tune => "Demeter's policy is reconfiguring it".into(),
        }
    }
}

/// The jobs that have an operation in flight in this daemon: a second one is refused.
#[derive(Debug, Default)]
pub struct Desk {
    busy: BTreeMap<String, (Busy, u64)>,
}

impl Desk {
    /// Makes `job` busy with `what`, or says why not.
    pub fn try_take(&mut self, job: &str, what: Busy, now: u64) -> Result<(), String> {
        if let Some((other, since)) = self.busy.get(job) {
            return Err(format!(
                "job {job} is busy: {} (for {} s); one operation per job at a time — follow it with `job show {job}`",
                other.describe(),
                now.saturating_sub(*since) / 1000
            ));
        }
        self.busy.insert(job.to_string(), (what, now));
        Ok(())
    }

    pub fn release(&mut self, job: &str) {
        self.busy.remove(job);
    }

    pub fn is_busy(&self, job: &str) -> bool {
        self.busy.contains_key(job)
    }
}

/// Configured agents that are not connected. With none configured, TaskManagers go to
/// whichever agents are connected, so at least one must be.
pub fn missing_agents(configured: &[String], connected: &[String]) -> Vec<String> {
    if configured.is_empty() {
        return if connected.is_empty() {
            vec!["(any agent)".to_string()]
        } else {
            Vec::new()
        };
    }
    configured
        .iter()
        .filter(|a| !connected.contains(a))
        .cloned()
        .collect()
}

/// Limits for a hand-made configuration when the job registered no search space.
pub const MAX_PARALLELISM: u32 = 4096;
pub const MAX_TASKMANAGERS: u32 = 1000;
pub const MIN_TM_MEMORY_MB: u32 = 128;
pub const MAX_TM_MEMORY_MB: u32 = 4 << 20;
pub const MAX_TM_CPU_MILLIS: u32 = 1024 * 1000;
pub const MAX_CHECKPOINT_S: u32 = 86_400;

fn out_of_bounds(c: &JobConfig) -> Option<String> {
    let checks = [
        (
            c.parallelism <= MAX_PARALLELISM,
            "parallelism",
            MAX_PARALLELISM,
        ),
        (
            c.task_managers() <= MAX_TASKMANAGERS,
            "TaskManagers",
            MAX_TASKMANAGERS,
        ),
        (
            c.tm_memory_mb <= MAX_TM_MEMORY_MB,
            "TaskManager MiB",
            MAX_TM_MEMORY_MB,
        ),
        (
            c.tm_cpu_millis <= MAX_TM_CPU_MILLIS,
            "TaskManager millicores",
            MAX_TM_CPU_MILLIS,
        ),
        (
            c.checkpoint_interval_s <= MAX_CHECKPOINT_S,
            "checkpoint seconds",
            MAX_CHECKPOINT_S,
        ),
    ];
    if let Some((_, what, max)) = checks.iter().find(|(ok, _, _)| !ok) {
        return Some(format!("{what} above {max}"));
    }
    (c.tm_memory_mb < MIN_TM_MEMORY_MB)
        .then(|| format!("TaskManager memory below {MIN_TM_MEMORY_MB} MiB"))
}

/// The configuration an apply asks for, if the daemon may start it now.
pub fn admit_apply(
    request: &JobApply,
    job: Option<&JobRecord>,
    missing_agents: &[String],
    now: u64,
) -> Result<JobConfig, String> {
    if now > request.deadline_ms {
        return Err(format!(
            "the request arrived {} ms after its deadline; nothing was started",
            now - request.deadline_ms
        ));
    }
    let job = job.ok_or_else(|| {
        format!(
            "no registered job {} (register it first: `job register`)",
            request.job
        )
    })?;
    let current = job.current.as_ref().map(|d| d.config);
    let to = apply_change(&request.change, current.as_ref()).map_err(|e| e.to_string())?;
    if current == Some(to) {
        return Err(format!("{} already runs {to}", job.name));
    }
    let violation = match &job.space {
        Some(space) => space.violation(&to),
        None => out_of_bounds(&to),
    };
    if let Some(why) = violation {
        return Err(format!("{to} may not be deployed: {why}"));
    }
    if !missing_agents.is_empty() {
        return Err(format!(
            "agents not connected: {}; refusing to start (the job's TaskManagers would have nowhere to run)",
            missing_agents.join(", ")
        ));
    }
    Ok(to)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use demeter_common::protocol::jobs::ConfigChange;

    use super::*;
    use crate::executor::Deployment;
    use crate::flink::JobId;
    use crate::models::space::SearchSpace;

    fn job(current: Option<&str>) -> JobRecord {
        JobRecord::for_tests(current.map(|c| Deployment {
            config: c.parse().unwrap(),
            job_id: JobId::from("j"),
            taskmanagers: None,
        }))
    }

    fn apply(change: &str) -> JobApply {
        JobApply {
            job: "bench".into(),
            change: crate::models::space::parse_change(change).unwrap(),
            deadline_ms: 1_000,
        }
    }

    #[test]
    fn one_operation_per_job_at_a_time() {
        let mut desk = Desk::default();
        desk.try_take("a", Busy::Apply, 0).unwrap();
        desk.try_take("b", Busy::Recover, 0).unwrap();
        let second = desk.try_take("a", Busy::Apply, 61_000).unwrap_err();
        assert!(
            second.contains("an apply is in flight (for 61 s)"),
            "{second}"
        );
        let resumed = Busy::Resume { op: 9 };
        assert!(desk.try_take("b", resumed.clone(), 0).is_err());
        assert!(desk.is_busy("a"));
        desk.release("a");
        assert!(!desk.is_busy("a"));
        desk.try_take("a", resumed, 0).unwrap();
        let err = desk.try_take("a", Busy::Recover, 0).unwrap_err();
        assert!(err.contains("operation 9 left in flight"), "{err}");
    }

    #[test]
    fn agents_configured_or_any() {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(missing_agents(&s(&["a", "b"]), &s(&["b", "c"])), s(&["a"]));
        assert!(missing_agents(&s(&["a"]), &s(&["a"])).is_empty());
        assert!(missing_agents(&[], &s(&["x"])).is_empty());
        assert_eq!(missing_agents(&[], &[]).len(), 1);
    }

    #[test]
    fn an_apply_is_admitted_only_when_it_can_be_carried_out() {
        let running = job(Some("p=1,slots=2,mem=1g,cpu=1,ckpt=5"));
        let to = admit_apply(&apply("p=2"), Some(&running), &[], 500).unwrap();
        assert_eq!(to, "p=2,slots=2,mem=1g,cpu=1,ckpt=5".parse().unwrap());

        let refusals = [
            (apply("p=2"), Some(job(None)), vec![], 500, "is needed"),
            (
                apply("p=1"),
                Some(running.clone()),
                vec![],
                500,
                "already runs",
            ),
            (apply("p=2"), None, vec![], 500, "no registered job"),
            (
                apply("p=2"),
                Some(running.clone()),
                vec![],
                1_001,
                "after its deadline",
            ),
            (
                apply("p=5000"),
                Some(running.clone()),
                vec![],
                0,
                "parallelism above",
            ),
            (
                apply("mem=64m"),
                Some(running.clone()),
                vec![],
                0,
                "memory below",
            ),
            (
                apply("p=2"),
                Some(running.clone()),
                vec!["n1".into()],
                0,
                "n1",
            ),
        ];
        for (request, job, missing, now, expected) in refusals {
            let err = admit_apply(&request, job.as_ref(), &missing, now).unwrap_err();
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }

    #[test]
    fn a_registered_search_space_bounds_what_may_be_applied() {
        let mut with_space = job(Some("p=1,slots=2,mem=1g,cpu=1,ckpt=5"));
        let space = SearchSpace {
            max_parallelism: 4,
            ..SearchSpace::default()
        };
        with_space.space = Some(space);
        let err = admit_apply(&apply("p=8,slots=4"), Some(&with_space), &[], 0).unwrap_err();
        assert!(err.contains("max parallelism"), "{err}");
        let first = ConfigChange {
            parallelism: Some(2),
            ..ConfigChange::default()
        };
        let request = JobApply {
            change: first,
            ..apply("p=2")
        };
        assert!(admit_apply(&request, Some(&with_space), &[], 0).is_ok());
    }
}

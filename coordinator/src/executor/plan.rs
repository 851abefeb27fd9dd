//! Which way a job goes from one configuration to another, and what it needs on the way.
//!
//! Pure: the caller passes what it knows about the cluster ([`ClusterFacts`]).

use serde::{Deserialize, Serialize};

use crate::models::space::JobConfig;
use demeter_common::protocol::TaskManagerSpec;

/// How a reconfiguration is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Strategy {
    /// The job is not running yet: start TaskManagers, submit without a savepoint.
    Initial,
    /// Only the parallelism changes and the job's TaskManagers already have the slots: the
    /// adaptive scheduler rescales in place (`PUT resource-requirements`), no savepoint.
    InPlace,
    /// Stop with a savepoint, restart the TaskManagers with the new sizes if they change,
    /// submit from the savepoint.
    Restart,
    /// The job stopped running behind Demeter's back (failed, cancelled, stuck restarting):
    /// the watchdog brings its current configuration back from the job's newest completed
    /// snapshot. Runs as a rollback from the start, so it retries with backoff, never gives up.
    Recover,
}

/// What the plan needs to know about the cluster, read by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterFacts {
    /// `jobmanager.scheduler: adaptive` (the job reports scheduler type `Adaptive`).
    pub adaptive_scheduler: bool,
    /// Slots free in the cluster now.
    pub free_slots: u32,
}

/// The strategy for going from `from` (running, if any) to `to`.
pub fn choose(from: Option<&JobConfig>, to: &JobConfig, facts: ClusterFacts) -> Strategy {
    let Some(from) = from else {
        return Strategy::Initial;
    };
    let only_parallelism = JobConfig {
        parallelism: to.parallelism,
        ..*from
    } == *to;
    // In place only on the TaskManagers the job has now: adding or removing TaskManagers
    // under a running job would move tasks without a savepoint of our own.
    let same_taskmanagers = from.task_managers() == to.task_managers();
    let extra_slots = to.parallelism.saturating_sub(from.parallelism);
    if only_parallelism
        && same_taskmanagers
        && facts.adaptive_scheduler
        && extra_slots <= facts.free_slots
    {
        Strategy::InPlace
    } else {
        Strategy::Restart
    }
}

/// Whether going from `from` to `to` needs new TaskManager processes.
pub fn taskmanagers_change(from: &JobConfig, to: &JobConfig) -> bool {
    from.task_managers() != to.task_managers()
        || from.slots_per_tm != to.slots_per_tm
        || from.tm_memory_mb != to.tm_memory_mb
        || from.tm_cpu_millis != to.tm_cpu_millis
}

/// TaskManager ids of a job: `<job>-tm<i>`. Stable across configurations, so a memory change
/// restarts `tm0` instead of adding a new name, and Flink's resource id equals the id.
pub fn taskmanager_id(job: &str, index: u32) -> String {
    format!("{job}-tm{index}")
}

/// The TaskManagers a configuration runs on.
pub fn taskmanager_specs(job: &str, cluster: &str, config: &JobConfig) -> Vec<TaskManagerSpec> {
    (0..config.task_managers())
        .map(|i| TaskManagerSpec {
            id: taskmanager_id(job, i),
            cluster: cluster.to_string(),
            process_memory_mb: config.tm_memory_mb,
            slots: config.slots_per_tm,
            cpu_millis: config.tm_cpu_millis,
            properties: vec![],
        })
        .collect()
}

/// The per-job Flink configuration a submission carries.
pub fn flink_configuration(config: &JobConfig) -> std::collections::BTreeMap<String, String> {
    [(
        "execution.checkpointing.interval".to_string(),
        format!("{} s", config.checkpoint_interval_s),
    )]
    .into()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> JobConfig {
        text.parse().unwrap()
    }

    const ADAPTIVE: ClusterFacts = ClusterFacts {
        adaptive_scheduler: true,
        free_slots: 4,
    };

    #[test]
    fn parallelism_only_within_the_same_taskmanagers_is_in_place() {
        let from = cfg("p=1,slots=2,mem=1g,cpu=1,ckpt=5");
        assert_eq!(
            choose(
                Some(&from),
                &cfg("p=2,slots=2,mem=1g,cpu=1,ckpt=5"),
                ADAPTIVE
            ),
            Strategy::InPlace
        );
    }

    #[test]
    fn everything_else_restarts() {
        let from = cfg("p=2,slots=2,mem=1g,cpu=1,ckpt=5");
        for to in [
            "p=2,slots=2,mem=1g,cpu=1,ckpt=10",
            "p=2,slots=2,mem=1536m,cpu=1,ckpt=5",
            "p=2,slots=1,mem=1g,cpu=1,ckpt=5",
            "p=2,slots=2,mem=1g,cpu=2,ckpt=5",
            // One more TaskManager needed.
            "p=3,slots=2,mem=1g,cpu=1,ckpt=5",
        ] {
            assert_eq!(
                choose(Some(&from), &cfg(to), ADAPTIVE),
                Strategy::Restart,
                "{to}"
            );
        }
        let to = cfg("p=1,slots=2,mem=1g,cpu=1,ckpt=5");
        let default_scheduler = ClusterFacts {
            adaptive_scheduler: false,
            ..ADAPTIVE
        };
        assert_eq!(
            choose(Some(&from), &to, default_scheduler),
            Strategy::Restart
        );
        let full = ClusterFacts {
            free_slots: 0,
            ..ADAPTIVE
        };
        let up = cfg("p=4,slots=4,mem=1g,cpu=1,ckpt=5");
        let from4 = cfg("p=3,slots=4,mem=1g,cpu=1,ckpt=5");
        assert_eq!(choose(Some(&from4), &up, full), Strategy::Restart);
        assert_eq!(choose(None, &up, ADAPTIVE), Strategy::Initial);
    }

    #[test]
    fn specs_follow_the_configuration() {
        let specs = taskmanager_specs("bench", "c", &cfg("p=3,slots=2,mem=1536m,cpu=0.5,ckpt=5"));
        let ids: Vec<_> = specs.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["bench-tm0", "bench-tm1"]);
        assert!(
            specs
                .iter()
                .all(|s| s.process_memory_mb == 1536 && s.slots == 2 && s.cpu_millis == 500)
        );
        let a = cfg("p=2,slots=2,mem=1g,cpu=1,ckpt=5");
        assert!(!taskmanagers_change(
            &a,
            &cfg("p=1,slots=2,mem=1g,cpu=1,ckpt=50")
        ));
        assert!(taskmanagers_change(
            &a,
            &cfg("p=3,slots=2,mem=1g,cpu=1,ckpt=5")
        ));
        assert_eq!(
            flink_configuration(&a)["execution.checkpointing.interval"],
            "5 s"
        );
    }
}

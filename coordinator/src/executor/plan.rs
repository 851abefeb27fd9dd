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
    /// Only the parallelism changes: the adaptive scheduler rescales in place (`PUT
    /// resource-requirements`), no savepoint. A scale-out that needs more TaskManagers of the
    /// same shape starts them first, while the job runs on; a scale-in stops afterwards the
    /// TaskManagers Flink left without any of the job's subtasks.
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
    // Onto fewer TaskManagers too: Flink, not Demeter, picks which TaskManagers keep the
    // job's subtasks after a rescale, so the release step asks Flink where they run and stops
    // only TaskManagers holding none.
    let new_slots = (to.task_managers() - to.task_managers().min(from.task_managers()))
        .saturating_mul(to.slots_per_tm);
    let extra_slots = to.parallelism.saturating_sub(from.parallelism);
    if only_parallelism
        && facts.adaptive_scheduler
        && extra_slots <= facts.free_slots.saturating_add(new_slots)
    {
        Strategy::InPlace
    } else {
        Strategy::Restart
    }
}

/// Whether an in-place change from `from` to `to` starts TaskManagers before it rescales.
pub fn adds_taskmanagers(from: &JobConfig, to: &JobConfig) -> bool {
    to.task_managers() > from.task_managers()
}

/// Whether an in-place change from `from` to `to` stops TaskManagers after it rescales.
pub fn releases_taskmanagers(from: &JobConfig, to: &JobConfig) -> bool {
    to.task_managers() < from.task_managers()
}

/// The TaskManagers an in-place scale-out runs on: the ones the job has, plus the lowest
/// unused indices until there are `wanted`.
pub fn scale_out_indices(current: &[u32], wanted: u32) -> Vec<u32> {
    let mut indices = current.to_vec();
    let mut next = 0;
    while (indices.len() as u64) < u64::from(wanted) {
        if !indices.contains(&next) {
            indices.push(next);
        }
        next += 1;
    }
    indices.sort_unstable();
    indices
}

/// Which of the TaskManagers `current` (indices) an in-place scale-in to `wanted` keeps, given
/// the ids of those Flink runs the job's subtasks on: every busy one, then idle ones (lowest
/// index first) up to `wanted`. More than `wanted` when the subtasks are spread wider.
pub fn kept_after_scale_in(job: &str, current: &[u32], busy: &[String], wanted: u32) -> Vec<u32> {
    let is_busy = |i: &u32| busy.iter().any(|id| *id == taskmanager_id(job, *i));
    let mut kept: Vec<u32> = current.iter().copied().filter(is_busy).collect();
    for i in current.iter().copied().filter(|i| !is_busy(i)) {
        if (kept.len() as u64) < u64::from(wanted) {
            kept.push(i);
        }
    }
    kept.sort_unstable();
    kept
}

/// Whether going from `from` to `to` needs new TaskManager processes.
pub fn taskmanagers_change(from: &JobConfig, to: &JobConfig) -> bool {
    from.task_managers() != to.task_managers() || !from.same_taskmanager_shape(to)
}

/// TaskManager ids of a job: `<job>-tm<i>`. Stable across configurations, so a memory change
/// restarts `tm0` instead of adding a new name, and Flink's resource id equals the id.
pub fn taskmanager_id(job: &str, index: u32) -> String {
    format!("{job}-tm{index}")
}

/// The TaskManagers a configuration runs on.
pub fn taskmanager_specs(job: &str, cluster: &str, config: &JobConfig) -> Vec<TaskManagerSpec> {
    let indices: Vec<u32> = (0..config.task_managers()).collect();
    taskmanager_specs_at(job, cluster, config, &indices)
}

/// The TaskManagers `<job>-tm<i>` for each of `indices`, sized by `config`.
pub fn taskmanager_specs_at(
    job: &str,
    cluster: &str,
    config: &JobConfig,
    indices: &[u32],
) -> Vec<TaskManagerSpec> {
    indices
        .iter()
        .map(|&i| TaskManagerSpec {
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
    fn a_scale_out_onto_more_taskmanagers_of_the_same_shape_is_in_place() {
        let from = cfg("p=2,slots=2,mem=1g,cpu=1,ckpt=5");
        let to = cfg("p=5,slots=2,mem=1g,cpu=1,ckpt=5");
        let full = ClusterFacts {
            free_slots: 0,
            ..ADAPTIVE
        };
        // Two new TaskManagers bring the four slots the three extra subtasks need.
        assert_eq!(choose(Some(&from), &to, full), Strategy::InPlace);
        assert!(adds_taskmanagers(&from, &to));
        assert!(!adds_taskmanagers(&to, &from));
    }

    #[test]
    fn a_scale_in_is_in_place_and_keeps_the_taskmanagers_flink_left_the_job_on() {
        let wide = cfg("p=4,slots=1,mem=1g,cpu=1,ckpt=5");
        let narrow = cfg("p=2,slots=1,mem=1g,cpu=1,ckpt=5");
        assert_eq!(choose(Some(&wide), &narrow, ADAPTIVE), Strategy::InPlace);
        assert!(releases_taskmanagers(&wide, &narrow));
        assert!(!releases_taskmanagers(&narrow, &wide));
        let busy = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Flink kept the subtasks on tm1 and tm3: those stay, whatever their index.
        assert_eq!(
            kept_after_scale_in(
                "bench",
                &[0, 1, 2, 3],
                &busy(&["bench-tm3", "bench-tm1"]),
                2
            ),
            [1, 3]
        );
        // One subtask on tm2 of a two-slot shape: tm2 and the lowest idle one stay.
        assert_eq!(
            kept_after_scale_in("bench", &[0, 1, 2], &busy(&["bench-tm2"]), 2),
            [0, 2]
        );
        // Spread wider than needed (or another job's TaskManager listed): nothing busy goes.
        assert_eq!(
            kept_after_scale_in(
                "bench",
                &[0, 1, 2],
                &busy(&["bench-tm0", "bench-tm2", "x"]),
                1
            ),
            [0, 2]
        );
        // A later scale-out fills the gaps first.
        assert_eq!(scale_out_indices(&[1, 3], 4), [0, 1, 2, 3]);
        assert_eq!(scale_out_indices(&[1, 3], 3), [0, 1, 3]);
        assert_eq!(scale_out_indices(&[0, 1, 2], 2), [0, 1, 2]);
        let specs = taskmanager_specs_at("bench", "c", &narrow, &[1, 3]);
        let ids: Vec<_> = specs.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["bench-tm1", "bench-tm3"]);
    }

    #[test]
    fn everything_else_restarts() {
        let from = cfg("p=2,slots=2,mem=1g,cpu=1,ckpt=5");
        for to in [
            "p=2,slots=2,mem=1g,cpu=1,ckpt=10",
            "p=2,slots=2,mem=1536m,cpu=1,ckpt=5",
            "p=2,slots=1,mem=1g,cpu=1,ckpt=5",
            "p=2,slots=2,mem=1g,cpu=2,ckpt=5",
            "p=3,slots=2,mem=1g,cpu=2,ckpt=5",
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

    /// The policy prices a change by the kind it expects (`ChangeKind::between`); on a cluster
    /// with room the executor must take that same way.
    #[test]
    fn the_executor_takes_the_way_the_policy_priced() {
        use crate::policy::ChangeKind;
        let mut configs = Vec::new();
        for p in 1..=6 {
            for slots in [1, 2, 3] {
                for mem in ["1g", "1536m"] {
                    for ckpt in [5, 30] {
                        configs.push(cfg(&format!(
                            "p={p},slots={slots},mem={mem},cpu=1,ckpt={ckpt}"
                        )));
                    }
                }
            }
        }
        for from in &configs {
            for to in configs.iter().filter(|to| *to != from) {
                let executor = choose(Some(from), to, ADAPTIVE) == Strategy::InPlace;
                let policy = ChangeKind::between(from, to) == ChangeKind::InPlace;
                assert_eq!(executor, policy, "{from} → {to}");
            }
        }
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

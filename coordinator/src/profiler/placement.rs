//! Where a copy's TaskManagers go when agents run them, and what the agents' nodes can still
//! give profiling. Pure: the agents' newest samples, the per-node reserve and what copies have
//! booked come in as arguments, the time as `now_ms`.
//!
//! A node's spare capacity is what its newest sample shows idle (cores × (1 − busy share)) and
//! available (memory), less the node's reserve (kept for production and everything else), less
//! the part of each booked copy TaskManager the sample does not show yet: a JVM grows to its
//! process size and its CPU limit only over time, and a TaskManager just ordered shows nothing.
//! Memory and CPU are both hard limits here; the batch's global cap is applied by
//! [`super::plan::plan_batch`] on top.

use std::collections::BTreeMap;

use demeter_common::metrics::Sample;
use demeter_common::protocol::TaskManagerSpec;

use super::plan::{CopyPlan, Resources};

const MIB: f64 = 1024.0 * 1024.0;

/// One copy TaskManager booked on an agent's node.
#[derive(Debug, Clone, PartialEq)]
pub struct Booking {
    pub agent: String,
    /// The TaskManager id (Flink's resource id, as the agent reports it in its JVM samples).
    pub taskmanager: String,
    /// Its CPU limit and process size.
    pub demand: Resources,
}

/// A TaskManager's CPU limit and process size.
pub fn demand(spec: &TaskManagerSpec) -> Resources {
    Resources {
        cpu_cores: f64::from(spec.cpu_millis) / 1000.0,
        memory_mb: f64::from(spec.process_memory_mb),
    }
}

/// CPU cores and resident MiB the JVMs of TaskManagers whose id starts with `prefix` use in
/// `sample`; `None` when none of them is in it.
pub fn jvm_usage<'a>(
    jvms: impl Iterator<Item = &'a demeter_common::metrics::JvmSample>,
    matches: impl Fn(&str) -> bool,
) -> Option<Resources> {
    let mut total: Option<Resources> = None;
    for j in jvms {
        if j.taskmanager_id.as_deref().is_some_and(&matches) {
            let t = total.get_or_insert_with(Resources::default);
            t.cpu_cores += f64::from(j.cpu_cores).max(0.0);
            t.memory_mb += j.rss_bytes as f64 / MIB;
        }
    }
    total
}

/// What `agent`'s node can still give profiling per its newest `sample` (see the module doc).
pub fn spare(agent: &str, sample: &Sample, reserve: Resources, booked: &[Booking]) -> Resources {
    let host = &sample.host;
    let busy = f64::from(host.cpu_busy).clamp(0.0, 1.0);
    let mut cpu = f64::from(host.cpu_count) * (1.0 - busy) - reserve.cpu_cores;
    let mut memory = host.mem_available_bytes as f64 / MIB - reserve.memory_mb;
    for b in booked.iter().filter(|b| b.agent == agent) {
        let used = jvm_usage(sample.jvms.iter(), |id| id == b.taskmanager).unwrap_or_default();
        cpu -= (b.demand.cpu_cores - used.cpu_cores).max(0.0);
        memory -= (b.demand.memory_mb - used.memory_mb).max(0.0);
    }
    Resources {
        cpu_cores: cpu.max(0.0),
        memory_mb: memory.max(0.0),
    }
}

/// The agents whose newest sample is at most `max_age_ms` old at `now_ms`, with their spare
/// capacity, in name order. Agents not in `allowed` are left out (empty: all).
pub fn spare_by_agent(
    samples: &[(String, Sample)],
    allowed: &[String],
    reserve: Resources,
    booked: &[Booking],
    now_ms: u64,
    max_age_ms: u64,
) -> BTreeMap<String, Resources> {
    samples
        .iter()
        .filter(|(agent, _)| allowed.is_empty() || allowed.contains(agent))
        .filter(|(_, s)| now_ms.saturating_sub(s.taken_at_ms) <= max_age_ms)
        .map(|(agent, s)| (agent.clone(), spare(agent, s, reserve, booked)))
        .collect()
}

/// Sum of every node's spare capacity: what the batch's planning may count on.
pub fn total(spare: &BTreeMap<String, Resources>) -> Resources {
    spare.values().fold(Resources::default(), |a, r| Resources {
        cpu_cores: a.cpu_cores + r.cpu_cores,
        memory_mb: a.memory_mb + r.memory_mb,
    })
}

/// How many TaskManagers of `demand` still fit in `spare` (fractional; infinite for a zero
/// demand in both).
fn headroom(spare: Resources, demand: Resources) -> f64 {
    let ratio = |have: f64, need: f64| {
        if need <= 0.0 {
            f64::INFINITY
        } else {
            have / need
        }
    };
    ratio(spare.cpu_cores, demand.cpu_cores).min(ratio(spare.memory_mb, demand.memory_mb))
}

/// Places each of `taskmanagers` on the node with the most room for it (the most further
/// TaskManagers of its size would fit; ties to the first name), booking as it goes, so one
/// copy spreads over nodes when one cannot take all. Without `count_cpu` only memory limits
/// (CPU is then bounded by the cap and the TaskManagers' CPU limits alone). Returns
/// TaskManager id → agent, or why a TaskManager fits on no node.
pub fn place(
    spare: &BTreeMap<String, Resources>,
    taskmanagers: &[TaskManagerSpec],
    count_cpu: bool,
) -> Result<BTreeMap<String, String>, String> {
    let mut left = spare.clone();
    let mut placed = BTreeMap::new();
    for tm in taskmanagers {
        let mut need = demand(tm);
        if !count_cpu {
            need.cpu_cores = 0.0;
        }
        let best = left
            .iter()
            .filter(|(_, room)| headroom(**room, need) >= 1.0 - 1e-9)
            .max_by(|(a_name, a), (b_name, b)| {
                headroom(**a, need)
                    .total_cmp(&headroom(**b, need))
                    // Equal room: the first name wins (max_by keeps the last maximum).
                    .then_with(|| b_name.cmp(a_name))
            })
            .map(|(name, _)| name.clone());
        let Some(agent) = best else {
            let roomiest = left
                .iter()
                .max_by(|a, b| headroom(*a.1, need).total_cmp(&headroom(*b.1, need)))
                .map_or_else(
                    || "no agent with a recent sample".to_string(),
                    |(name, r)| {
                        format!(
                            "the roomiest agent, {name}, has {:.2} cores / {:.0} MiB to spare",
                            r.cpu_cores, r.memory_mb
                        )
                    },
                );
            return Err(format!(
                "TaskManager {} needs {:.2} cores / {:.0} MiB; {roomiest}",
                tm.id, need.cpu_cores, need.memory_mb
            ));
        };
        if let Some(room) = left.get_mut(&agent) {
            room.cpu_cores -= need.cpu_cores;
            room.memory_mb -= need.memory_mb;
        }
        placed.insert(tm.id.clone(), agent);
    }
    Ok(placed)
}

/// The agents' nodes whose available memory fell below the reserve while copy TaskManagers
/// run there (per `booked`): production needs it back.
pub fn pressed(samples: &[(String, Sample)], reserve_mb: f64, booked: &[Booking]) -> Vec<String> {
    samples
        .iter()
        .filter(|(agent, _)| booked.iter().any(|b| &b.agent == agent))
        .filter(|(_, s)| (s.host.mem_available_bytes as f64 / MIB) < reserve_mb)
        .map(|(agent, _)| agent.clone())
        .collect()
}

/// The dynamic properties that make an agent's TaskManager join `plan`'s copy rather than the
/// cluster its conf dir describes: the copy's JobManager address and RPC port, its own
/// temporary (and so working and local-state) directories, its state backend and checkpoint
/// storage (a TaskManager builds them from the job's settings over its own configuration, so
/// production's conf dir would otherwise send copy state to production's checkpoint
/// directory), and the other settings of the copy's `config.yaml` a TaskManager reads itself.
/// Later `-D` values win over the conf dir's.
pub fn copy_properties(plan: &CopyPlan) -> Vec<(String, String)> {
    let dir = plan.dir.display();
    [
        ("jobmanager.rpc.address", plan.jobmanager_address.clone()),
        ("jobmanager.rpc.port", plan.rpc_port.to_string()),
        ("io.tmp.dirs", format!("{dir}/tmp")),
        ("state.backend.type", "hashmap".into()),
        (
            "execution.checkpointing.dir",
            format!("file://{dir}/checkpoints"),
        ),
        (
            "execution.checkpointing.savepoint-dir",
            format!("file://{dir}/savepoints"),
        ),
        ("taskmanager.memory.managed.fraction", "0.1".into()),
        ("heartbeat.interval", "2 s".into()),
        ("heartbeat.timeout", "10 s".into()),
        ("metrics.latency.interval", "0".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;

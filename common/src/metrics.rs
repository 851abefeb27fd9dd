//! What an agent measures: the sample types carried in metric batches.
//!
//! These are plain data; collectors in the agent fill them and the coordinator stores them.
//! Units are in the field names so no reader has to guess.

use serde::{Deserialize, Serialize};

/// One sampling tick on one node: the host and every Flink TaskManager JVM found on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Wall-clock time the sample was taken, milliseconds since the Unix epoch (agent's clock).
    pub taken_at_ms: u64,
    pub host: HostSample,
    pub jvms: Vec<JvmSample>,
}

/// Host-wide CPU, memory and load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HostSample {
    /// Number of logical CPUs.
    pub cpu_count: u32,
    /// Busy share of all CPUs since the previous sample, 0.0..=1.0.
    pub cpu_busy: f32,
    pub mem_total_bytes: u64,
    pub mem_used_bytes: u64,
    pub mem_available_bytes: u64,
    pub swap_used_bytes: u64,
    pub load_1m: f32,
    pub load_5m: f32,
    pub load_15m: f32,
}

/// One Flink TaskManager JVM on the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct JvmSample {
    pub pid: u32,
    /// The TaskManager's resource id when the agent started it or could read it from the
    /// command line; `None` for TaskManagers started by someone else.
    pub taskmanager_id: Option<String>,
    /// Process CPU since the previous sample, in cores (1.0 = one core fully busy).
    pub cpu_cores: f32,
    pub rss_bytes: u64,
    /// Heap and GC counters from the JVM's hsperfdata file; `None` when the file is missing or
    /// unreadable (e.g. `-XX:-UsePerfData`, or another user's private /tmp).
    pub heap: Option<HeapSample>,
}

/// Heap and GC counters, as `jstat -gc` reports them (bytes and milliseconds instead of KiB and
/// seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HeapSample {
    pub young_used_bytes: u64,
    pub young_committed_bytes: u64,
    pub young_max_bytes: u64,
    pub old_used_bytes: u64,
    pub old_committed_bytes: u64,
    pub old_max_bytes: u64,
    pub metaspace_used_bytes: u64,
    pub metaspace_committed_bytes: u64,
    pub young_gc_count: u64,
    pub young_gc_time_ms: f64,
    pub full_gc_count: u64,
    pub full_gc_time_ms: f64,
    /// Concurrent GC cycles (G1's CGC column); 0 for collectors that have none.
    pub concurrent_gc_count: u64,
    pub concurrent_gc_time_ms: f64,
}

impl HeapSample {
    pub fn heap_used_bytes(&self) -> u64 {
        self.young_used_bytes + self.old_used_bytes
    }
    pub fn heap_committed_bytes(&self) -> u64 {
        self.young_committed_bytes + self.old_committed_bytes
    }
    pub fn heap_max_bytes(&self) -> u64 {
        self.young_max_bytes + self.old_max_bytes
    }
    pub fn gc_time_ms(&self) -> f64 {
        self.young_gc_time_ms + self.full_gc_time_ms + self.concurrent_gc_time_ms
    }
}

//! The agent's collectors and the [`Sampler`] that runs them once per tick.
//!
//! Cost is the design constraint (the agent targets ≤ 8 MiB RSS and ≤ 0.2 % of a core at 1 Hz):
//! a tick reads `/proc/stat`, `/proc/meminfo`, `/proc/loadavg`, and per TaskManager its `stat`,
//! `statm` and hsperfdata file, reusing buffers. Scanning every `/proc/*/cmdline` for new
//! TaskManagers happens only every `discovery_interval_ms`.

pub mod discovery;
pub mod gc;
pub mod host;
pub mod hsperf;
pub mod process;

use std::path::PathBuf;

use demeter_common::metrics::{HeapSample, JvmSample, Sample};
use serde::{Deserialize, Serialize};

use self::discovery::{DiscoveredJvm, discover};
use self::gc::GcCounters;
use self::host::{HostCollector, host_sample};
use self::process::{
    CpuReading, ProcStatus, ProcUnits, cpu_cores, parse_stat, parse_statm_rss_pages, read_bytes,
    read_text,
};
use crate::error::{Error, Result};

/// What the sampler reads and how often it looks for new TaskManagers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplerConfig {
    /// Where procfs is mounted (default `/proc`). Tests point it at a fixture tree; an agent in
    /// a container points it at the host's procfs mounted elsewhere. Host CPU and memory always
    /// come from sysinfo, which reads `/proc`.
    pub proc_root: PathBuf,
    /// The host's temporary directory (default `/tmp`), searched for `hsperfdata_*/<pid>` when
    /// the JVM's own `/tmp` (seen through `<proc_root>/<pid>/root`) is not readable.
    pub host_tmp: PathBuf,
    /// How often to rescan `<proc_root>/*/cmdline` for TaskManagers, in ms (default 10 000).
    /// TaskManagers that exit are dropped on the next tick regardless; 0 rescans every tick.
    pub discovery_interval_ms: u64,
    /// Read heap and GC counters from hsperfdata (default true). Off, `JvmSample::heap` is
    /// always `None`.
    pub read_heap: bool,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            host_tmp: PathBuf::from("/tmp"),
            discovery_interval_ms: 10_000,
            read_heap: true,
        }
    }
}

/// Produces one [`Sample`] per call, keeping what CPU deltas and discovery need between calls.
#[derive(Debug)]
pub struct Sampler {
    config: SamplerConfig,
    host: HostCollector,
    units: ProcUnits,
    jvms: Vec<TrackedJvm>,
    last_discovery_ms: Option<u64>,
    text: String,
    bytes: Vec<u8>,
}

#[derive(Debug)]
struct TrackedJvm {
    pid: u32,
    taskmanager_id: Option<String>,
    status: Option<ProcStatus>,
    stat_path: PathBuf,
    statm_path: PathBuf,
    prev_cpu: Option<CpuReading>,
    /// Located at discovery; `None` until a file is found (retried at each discovery).
    hsperf_path: Option<PathBuf>,
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Result<Self> {
        Ok(Self {
            config,
            host: HostCollector::new()?,
            units: ProcUnits::of_this_host(),
            jvms: Vec::new(),
            last_discovery_ms: None,
            text: String::new(),
            bytes: Vec::new(),
        })
    }

    /// One tick at agent time `now_ms` (ms since the Unix epoch). CPU figures cover the time
    /// since the previous call; a TaskManager's first sample reports 0 cores.
    pub fn sample(&mut self, now_ms: u64) -> Sample {
        if self.discovery_due(now_ms) {
            self.rediscover(now_ms);
        }
        let host = host_sample(&self.host.read());
        let mut jvms = Vec::with_capacity(self.jvms.len());
        let (units, read_heap) = (self.units, self.config.read_heap);
        let mut pid_reused = false;
        self.jvms.retain_mut(|jvm| {
            let outcome = sample_jvm(
                jvm,
                now_ms,
                units,
                read_heap,
                &mut self.text,
                &mut self.bytes,
            );
            match outcome {
                Ok(Some(sample)) => {
                    jvms.push(sample);
                    true
                }
                Ok(None) => {
                    tracing::info!(pid = jvm.pid, "TaskManager pid now names another process");
                    pid_reused = true;
                    false
                }
                Err(error) => {
                    tracing::info!(pid = jvm.pid, %error, "TaskManager gone");
                    false
                }
            }
        });
        // The new process under that pid may be a TaskManager too; find out next tick.
        if pid_reused {
            self.rediscover_next_sample();
        }
        Sample {
            taken_at_ms: now_ms,
            host,
            jvms,
        }
    }

    /// Makes the next [`Sampler::sample`] rescan for TaskManagers, e.g. right after the agent
    /// started one.
    pub fn rediscover_next_sample(&mut self) {
        self.last_discovery_ms = None;
    }

    /// The pids of the TaskManagers currently sampled.
    pub fn tracked_pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.jvms.iter().map(|j| j.pid)
    }

    fn discovery_due(&self, now_ms: u64) -> bool {
        match self.last_discovery_ms {
            None => true,
            // A clock stepped backwards also triggers a rescan rather than a long pause.
            Some(last) => now_ms < last || now_ms - last >= self.config.discovery_interval_ms,
        }
    }

    fn rediscover(&mut self, now_ms: u64) {
        self.last_discovery_ms = Some(now_ms);
        let found = match discover(&self.config.proc_root) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "TaskManager discovery failed");
                return;
            }
        };
        let mut previous = std::mem::take(&mut self.jvms);
        for DiscoveredJvm {
            pid,
            resource_id,
            status,
        } in found
        {
            let mut jvm = match previous.iter().position(|j| j.pid == pid) {
                Some(i) => previous.swap_remove(i),
                None => {
                    tracing::info!(pid, taskmanager_id = ?resource_id, "TaskManager found");
                    let dir = self.config.proc_root.join(pid.to_string());
                    TrackedJvm {
                        pid,
                        taskmanager_id: None,
                        status: None,
                        stat_path: dir.join("stat"),
                        statm_path: dir.join("statm"),
                        prev_cpu: None,
                        hsperf_path: None,
                    }
                }
            };
            jvm.taskmanager_id = resource_id;
            jvm.status = status;
            if self.config.read_heap && jvm.hsperf_path.is_none() {
                jvm.hsperf_path = hsperf::locate(
                    &self.config.proc_root,
                    &self.config.host_tmp,
                    pid,
                    jvm.status.as_ref(),
                );
                if jvm.hsperf_path.is_none() {
                    tracing::debug!(pid, "no hsperfdata file (yet)");
                }
            }
            self.jvms.push(jvm);
        }
    }
}

/// Errors only when the process is gone (its `stat` or `statm` unreadable); `None` when its pid
/// now belongs to a process started later. Heap problems only leave `heap` empty.
fn sample_jvm(
    jvm: &mut TrackedJvm,
    now_ms: u64,
    units: ProcUnits,
    read_heap: bool,
    text: &mut String,
    bytes: &mut Vec<u8>,
) -> Result<Option<JvmSample>> {
    read_text(&jvm.stat_path, text)?;
    let reading = CpuReading {
        stat: parse_stat(text)?,
        at_ms: now_ms,
    };
    if jvm
        .prev_cpu
        .is_some_and(|prev| prev.stat.start_ticks != reading.stat.start_ticks)
    {
        return Ok(None);
    }
    read_text(&jvm.statm_path, text)?;
    let rss_bytes = parse_statm_rss_pages(text)?.saturating_mul(units.page_size);
    let cpu = cpu_cores(jvm.prev_cpu.as_ref(), &reading, units);
    jvm.prev_cpu = Some(reading);
    let heap = if read_heap {
        read_heap_sample(jvm, bytes)
    } else {
        None
    };
    Ok(Some(JvmSample {
        pid: jvm.pid,
        taskmanager_id: jvm.taskmanager_id.clone(),
        cpu_cores: cpu,
        rss_bytes,
        heap,
    }))
}

fn read_heap_sample(jvm: &mut TrackedJvm, bytes: &mut Vec<u8>) -> Option<HeapSample> {
    let path = jvm.hsperf_path.as_ref()?;
    let result = read_bytes(path, bytes).and_then(|()| GcCounters::parse(bytes));
    match result {
        Ok(counters) => Some(counters.heap_sample()),
        Err(error) => {
            tracing::debug!(pid = jvm.pid, %error, "hsperfdata unusable this tick");
            // A vanished file is looked for again at the next discovery; a malformed one may be
            // a torn read and is simply retried next tick.
            if matches!(error, Error::Io { .. }) {
                jvm.hsperf_path = None;
            }
            None
        }
    }
}

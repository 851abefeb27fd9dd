//! What a profiling batch will run, decided before anything starts: each copy's ports and
//! directories, its program arguments from the registered template, its TaskManagers, and
//! whether it fits under the profiling cap. Pure: the caller passes the ports in use and the
//! resources available.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use demeter_common::protocol::TaskManagerSpec;
use serde::{Deserialize, Serialize};

use crate::executor::plan::{flink_configuration, taskmanager_specs};
use crate::models::space::JobConfig;
use crate::{Error, Result};

/// `count` consecutive ports from `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    pub first: u16,
    pub count: u16,
}

impl PortRange {
    pub fn contains(&self, port: u16) -> bool {
        port >= self.first && u32::from(port) < u32::from(self.first) + u32::from(self.count)
    }

    pub fn ports(&self) -> impl Iterator<Item = u16> + use<> {
        let this = *self;
        (0..this.count).filter_map(move |i| this.first.checked_add(i))
    }
}

/// CPU cores and memory (MiB): the policy's own type, so the room the loop reports and what
/// the profiler books are one thing.
pub use crate::policy::ProfilingRoom as Resources;

impl Resources {
    fn plus(self, o: Resources) -> Resources {
        Resources {
            cpu_cores: self.cpu_cores + o.cpu_cores,
            memory_mb: self.memory_mb + o.memory_mb,
        }
    }

    fn minus(self, o: Resources) -> Resources {
        Resources {
            cpu_cores: self.cpu_cores - o.cpu_cores,
            memory_mb: self.memory_mb - o.memory_mb,
        }
    }

    fn fits_in(self, limit: Resources) -> bool {
        // A little slack for float sums of exact figures (0.1 + 0.2 …).
        self.cpu_cores <= limit.cpu_cores + 1e-9 && self.memory_mb <= limit.memory_mb + 1e-9
    }
}

/// How copies are laid out and what they may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// Copies' REST ports and JobManager RPC ports, copy i taking the i-th free pair.
    pub rest_ports: PortRange,
    pub rpc_ports: PortRange,
    /// Each copy gets `<root>/<name>/` and nothing else on disk.
    pub root: PathBuf,
    /// The copy's JobManager process size.
    pub jm_memory_mb: u32,
    /// CPU booked for a copy's JobManager (mostly idle; the cap must still see it).
    pub jm_cpu_cores: f64,
    /// Never more than this for all profiling copies together.
    pub cap: Resources,
    /// The address TaskManagers reach the copies' JobManagers at (they run on this host);
    /// anything but loopback makes the JobManagers listen on every interface, for agents on
    /// other nodes.
    #[serde(default = "loopback")]
    pub jobmanager_address: String,
}

/// Copies' JobManagers listen on loopback only unless agents elsewhere must reach them.
pub fn loopback() -> String {
    "127.0.0.1".into()
}

/// One profiling copy, ready to start.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyPlan {
    pub batch: u64,
    pub index: usize,
    /// Cluster name, also the prefix of its TaskManager ids: `prof-b<batch>-c<index>`.
    pub name: String,
    pub config: JobConfig,
    pub rate: f64,
    pub rest_port: u16,
    pub rpc_port: u16,
    /// `<root>/<name>`: conf, log, checkpoints, savepoints, tmp, upload, output.
    pub dir: PathBuf,
    pub program_args: Vec<String>,
    /// Per-job Flink configuration of the submission (the checkpoint interval).
    pub flink_configuration: BTreeMap<String, String>,
    pub taskmanagers: Vec<TaskManagerSpec>,
    pub jm_memory_mb: u32,
    /// Where the copy's TaskManagers reach its JobManager ([`Layout::jobmanager_address`]).
    pub jobmanager_address: String,
    /// What the copy books against the cap.
    pub demand: Resources,
}

impl CopyPlan {
    pub fn conf_dir(&self) -> PathBuf {
        self.dir.join("conf")
    }
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("log")
    }
    pub fn output_dir(&self) -> PathBuf {
        self.dir.join("output")
    }
    /// The subdirectories a copy needs before its JobManager starts.
    pub fn subdirs(&self) -> Vec<PathBuf> {
        [
            "conf",
            "log",
            "pid",
            "checkpoints",
            "savepoints",
            "tmp",
            "upload",
            "output",
        ]
        .iter()
        .map(|d| self.dir.join(d))
        .collect()
    }
}

/// A candidate of the batch: started, or skipped and why.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    Start(Box<CopyPlan>),
    Skipped { config: JobConfig, reason: String },
}

/// What the batch may not use: ports already bound (production's among them) and, besides
/// the cap, what the host has free now (`None`: only the cap counts).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Surroundings {
    pub busy_ports: Vec<u16>,
    /// Already booked by profiling copies still running (other batches).
    pub profiling_in_use: Resources,
    pub host_available: Option<Resources>,
    /// `host_available` is where the TaskManagers run (the agents' nodes) and the copies'
    /// JobManagers run elsewhere (this host): they count against the cap only.
    pub jobmanagers_elsewhere: bool,
}

/// What one more copy's TaskManagers could take now: the cap, less what profiling holds, and
/// what the host has free, each less the copy's JobManager where it counts (see
/// [`plan_batch`]). What the policy is told, so it orders only copies that would be admitted.
pub fn taskmanager_room(layout: &Layout, around: &Surroundings) -> Resources {
    let jobmanager = Resources {
        cpu_cores: layout.jm_cpu_cores,
        memory_mb: f64::from(layout.jm_memory_mb),
    };
    let under_cap = layout.cap.minus(around.profiling_in_use).minus(jobmanager);
    let on_host = match around.host_available {
        Some(free) if around.jobmanagers_elsewhere => free,
        Some(free) => free.minus(jobmanager),
        None => under_cap,
    };
    Resources {
        cpu_cores: under_cap.cpu_cores.min(on_host.cpu_cores).max(0.0),
        memory_mb: under_cap.memory_mb.min(on_host.memory_mb).max(0.0),
    }
}

/// Substitutes the profiling template: `{rate}` (records/s, integral when it is), `{output}`
/// (the copy's own output directory as a `file://` URI) and `{dir}` (the copy's directory).
/// Words are split on whitespace. A template that names any other absolute path or URI is
/// refused: it could be production's sink or state.
pub fn substitute(template: &str, rate: f64, dir: &Path) -> Result<Vec<String>> {
    if !(rate.is_finite() && rate >= 0.0) {
        return Err(Error::Executor(format!(
            "profiling rate {rate} is not a rate"
        )));
    }
    let rate_text = if rate.fract() == 0.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate}")
    };
    let output = format!("file://{}", dir.join("output").display());
    let dir_text = dir.display().to_string();
    let mut args = Vec::new();
    for word in template.split_whitespace() {
        if word.starts_with('/') || word.contains("://") {
            return Err(Error::Executor(format!(
                "profiling template names {word:?}: copies may only use paths of their own \
                 ({{output}}, {{dir}}), never production's sink or state"
            )));
        }
        let out = word
            .replace("{rate}", &rate_text)
            .replace("{output}", &output)
            .replace("{dir}", &dir_text);
        if let Some(open) = out.find('{').filter(|&i| out[i..].contains('}')) {
            let unknown = &out[open..];
            return Err(Error::Executor(format!(
                "profiling template: unknown placeholder in {unknown:?} (known: {{rate}}, {{output}}, {{dir}})"
            )));
        }
        args.push(out);
    }
    Ok(args)
}

/// The cluster name of copy `index` of `batch`.
pub fn copy_name(batch: u64, index: usize) -> String {
    format!("prof-b{batch}-c{index}")
}

/// Plans a batch: candidates in the caller's order of preference; each gets the next free
/// port pair and is admitted while everything admitted fits under the cap (less what other
/// profiling holds) and what the host has free. Ports and directories are never shared.
pub fn plan_batch(
    batch: u64,
    candidates: &[JobConfig],
    rate: f64,
    template: &str,
    layout: &Layout,
    around: &Surroundings,
) -> Result<Vec<Admission>> {
    let cap = Resources {
        cpu_cores: layout.cap.cpu_cores - around.profiling_in_use.cpu_cores,
        memory_mb: layout.cap.memory_mb - around.profiling_in_use.memory_mb,
    };
    let host = around.host_available.unwrap_or(Resources {
        cpu_cores: f64::INFINITY,
        memory_mb: f64::INFINITY,
    });
    let free = |range: &PortRange, other: &PortRange| -> Vec<u16> {
        range
            .ports()
            .filter(|p| !around.busy_ports.contains(p) && !other.contains(*p))
            .collect()
    };
    let mut rest_ports = free(&layout.rest_ports, &layout.rpc_ports).into_iter();
    let mut rpc_ports = free(&layout.rpc_ports, &layout.rest_ports).into_iter();
    let (mut booked, mut booked_host) = (Resources::default(), Resources::default());
    let mut out = Vec::with_capacity(candidates.len());
    for (index, config) in candidates.iter().enumerate() {
        let name = copy_name(batch, index);
        let taskmanagers = taskmanager_specs(&name, &name, config);
        let taskmanagers_demand = Resources {
            cpu_cores: config.total_cpu_cores(),
            memory_mb: config.total_memory_mb(),
        };
        let demand = taskmanagers_demand.plus(Resources {
            cpu_cores: layout.jm_cpu_cores,
            memory_mb: f64::from(layout.jm_memory_mb),
        });
        let host_demand = if around.jobmanagers_elsewhere {
            taskmanagers_demand
        } else {
            demand
        };
        let skip = |reason: String| Admission::Skipped {
            config: *config,
            reason,
        };
        let fits_cap = booked.plus(demand).fits_in(cap);
        if !fits_cap || !booked_host.plus(host_demand).fits_in(host) {
            let (left, what) = if fits_cap {
                (
                    host.minus(booked_host),
                    "the free resources where copies run",
                )
            } else {
                (cap.minus(booked), "the profiling cap")
            };
            out.push(skip(format!(
                "needs {:.2} cores / {:.0} MiB; {:.2} cores / {:.0} MiB left under {what}",
                demand.cpu_cores,
                demand.memory_mb,
                left.cpu_cores.max(0.0),
                left.memory_mb.max(0.0)
            )));
            continue;
        }
        let (Some(rest_port), Some(rpc_port)) = (rest_ports.next(), rpc_ports.next()) else {
            out.push(skip("no free profiling port pair left".into()));
            continue;
        };
        let dir = layout.root.join(&name);
        let program_args = substitute(template, rate, &dir)?;
        booked = booked.plus(demand);
        booked_host = booked_host.plus(host_demand);
        out.push(Admission::Start(Box::new(CopyPlan {
            batch,
            index,
            name,
            config: *config,
            rate,
            rest_port,
            rpc_port,
            dir,
            program_args,
            flink_configuration: flink_configuration(config),
            taskmanagers,
            jm_memory_mb: layout.jm_memory_mb,
            jobmanager_address: layout.jobmanager_address.clone(),
            demand,
        })));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
pub(crate) mod tests;

//! Runs Flink TaskManagers on the coordinator's order: start (or restart with a new spec),
//! stop, kill, list. The decisions live in the sans-IO [`state::Table`]; a [`Backend`] turns
//! its actions into processes: [`child`] (local child processes, used by tests and the lab)
//! or [`systemd`] (production units, see `ops/systemd/README.md`).
//!
//! On agent shutdown [`Supervisor::shutdown`] stops child-backend TaskManagers (they are the
//! agent's children and would otherwise outlive it unsupervised); systemd TaskManagers keep
//! running, because they are the node's capacity and systemd supervises them.

pub mod cgroup;
pub mod child;
pub mod config;
pub mod state;
pub mod systemd;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use demeter_common::protocol::{TaskManagerSpec, TaskManagerState, TaskManagerStatus};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::error::{Error, Result};
use cgroup::CpuLimiter;
use config::{BackendKind, SupervisorConfig};
use state::{Action, Exit, Table};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a backend reports about its processes between orders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Exited {
        id: String,
        pid: Option<u32>,
        exit: Exit,
    },
    /// Started again by someone else (systemd's `Restart=on-failure`).
    Respawned { id: String, pid: u32 },
}

/// Turns [`Action`]s into processes. Exits are reported on the event channel the backend was
/// built with.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Starts a process for `spec`; its pid when known.
    fn spawn<'a>(&'a self, spec: &'a TaskManagerSpec) -> BoxFuture<'a, Result<Option<u32>>>;
    /// Asks the process to end (SIGTERM or `systemctl stop`).
    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;
    /// SIGKILL, to the JVM itself.
    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Called every tick; a backend that cannot wait for exits looks for them here.
    fn poll(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// Whether its TaskManagers outlive the agent (then shutdown leaves them running).
    fn outlives_agent(&self) -> bool;
}

/// Builds the configured backend and starts the supervisor; needs a running tokio runtime.
pub fn from_config(config: &SupervisorConfig) -> Arc<Supervisor> {
    let (events_tx, events) = mpsc::unbounded_channel();
    let grace = Duration::from_millis(config.stop_grace_ms);
    let (backend, tick): (Arc<dyn Backend>, Duration) = match config.backend {
        BackendKind::Child => {
            let cpu = if config.enforce_cpu {
                let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
                CpuLimiter::detect(std::path::Path::new("/sys/fs/cgroup"), &own)
            } else {
                CpuLimiter::Unavailable {
                    reason: "enforce_cpu = false".into(),
                }
            };
            info!(?cpu, "child TaskManager CPU limits");
            let backend = child::ChildBackend::new(config.clusters.clone(), cpu, events_tx);
            (Arc::new(backend), Duration::from_millis(200))
        }
        BackendKind::Systemd => {
            let tick = Duration::from_millis(config.systemd.poll_interval_ms.max(100));
            let backend = systemd::SystemdBackend::new(config.systemd.clone(), events_tx);
            (Arc::new(backend), tick)
        }
    };
    Supervisor::start(backend, events, grace, tick)
}

/// Checks every backend needs: Flink refuses a zero size or slot count only in its log.
pub fn check_sizes(spec: &TaskManagerSpec) -> Result<()> {
    if spec.process_memory_mb == 0 || spec.slots == 0 {
        return Err(Error::InvalidSpec(format!(
            "{}: process memory ({} MiB) and slots ({}) must be positive",
            spec.id, spec.process_memory_mb, spec.slots
        )));
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The shell around [`Table`]: runs actions on the backend and feeds the outcomes back.
#[derive(Debug)]
pub struct Supervisor {
    table: Mutex<Table>,
    backend: Arc<dyn Backend>,
    /// Bumped on every change of the table, so order handlers can wait for a state.
    changed: watch::Sender<u64>,
    /// Bumped whenever a process was started, so the sampler looks for new JVMs at once.
    spawned: watch::Sender<u64>,
    stop_grace: Duration,
}

impl Supervisor {
    /// Starts the driver task (events, grace-period escalation, backend polling every `tick`).
    pub fn start(
        backend: Arc<dyn Backend>,
        events: mpsc::UnboundedReceiver<Event>,
        stop_grace: Duration,
        tick: Duration,
    ) -> Arc<Self> {
        let supervisor = Arc::new(Self {
            table: Mutex::new(Table::new(stop_grace.as_millis() as u64)),
            backend,
            changed: watch::channel(0).0,
            spawned: watch::channel(0).0,
            stop_grace,
        });
        tokio::spawn(drive(Arc::downgrade(&supervisor), events, tick));
        supervisor
    }

    /// Receives a bump after each process start.
    pub fn subscribe_spawned(&self) -> watch::Receiver<u64> {
        self.spawned.subscribe()
    }

    fn with_table<T>(&self, f: impl FnOnce(&mut Table) -> T) -> Result<T> {
        let mut table = self
            .table
            .lock()
            .map_err(|_| Error::Supervisor("state lock poisoned".into()))?;
        let out = f(&mut table);
        drop(table);
        self.changed.send_modify(|g| *g += 1);
        Ok(out)
    }

    async fn run(&self, actions: Vec<Action>) -> Result<()> {
        let mut queue: std::collections::VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            let more = match action {
                Action::Spawn(spec) => {
                    let result = self.backend.spawn(&spec).await;
                    let more = self.with_table(|t| match &result {
                        Ok(pid) => t.spawned(&spec.id, *pid, now_ms()),
                        Err(e) => t.spawn_failed(&spec.id, &e.to_string()),
                    })?;
                    match result {
                        Ok(pid) => {
                            info!(id = %spec.id, ?pid, memory_mb = spec.process_memory_mb, slots = spec.slots, "TaskManager started");
                            self.spawned.send_modify(|g| *g += 1);
                        }
                        Err(e) => warn!(id = %spec.id, error = %e, "TaskManager failed to start"),
                    }
                    more
                }
                Action::Terminate { id } => {
                    if let Err(e) = self.backend.terminate(&id).await {
                        warn!(%id, error = %e, "stopping TaskManager failed");
                    }
                    vec![]
                }
                Action::Kill { id } => {
                    if let Err(e) = self.backend.kill(&id).await {
                        warn!(%id, error = %e, "killing TaskManager failed");
                    }
                    vec![]
                }
            };
            queue.extend(more);
        }
        Ok(())
    }

    /// Waits until `done` holds for the table or `timeout` passes.
    async fn wait_for(&self, timeout: Duration, done: impl Fn(&Table) -> bool) {
        let mut changes = self.changed.subscribe();
        let _ = tokio::time::timeout(timeout, async {
            loop {
                if self.table.lock().map(|t| done(&t)).unwrap_or(true) {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    /// Starts (or restarts with the new spec) and waits until the process runs or failed.
    pub async fn start_task_manager(&self, spec: TaskManagerSpec) -> Result<TaskManagerStatus> {
        let id = spec.id.clone();
        let actions = self.with_table(|t| t.request_start(spec, now_ms()))?;
        self.run(actions).await?;
        // A restart first waits for the old process: up to the grace period and the kill.
        self.wait_for(self.stop_grace + Duration::from_secs(10), |t| {
            t.status(&id).is_none_or(|s| {
                matches!(
                    s.state,
                    TaskManagerState::Running
                        | TaskManagerState::Failed(_)
                        | TaskManagerState::Stopped
                )
            })
        })
        .await;
        self.status(&id)
    }

    /// Stops gracefully and waits (grace period plus a little) until it has ended.
    pub async fn stop_task_manager(&self, id: &str) -> Result<TaskManagerStatus> {
        let actions = self.with_table(|t| t.request_stop(id, now_ms()))??;
        self.run(actions).await?;
        self.wait_until_ended(id, self.stop_grace + Duration::from_secs(10))
            .await
    }

    /// SIGKILL and waits until the exit is seen.
    pub async fn kill_task_manager(&self, id: &str) -> Result<TaskManagerStatus> {
        let actions = self.with_table(|t| t.request_kill(id))??;
        self.run(actions).await?;
        self.wait_until_ended(id, Duration::from_secs(10)).await
    }

    async fn wait_until_ended(&self, id: &str, timeout: Duration) -> Result<TaskManagerStatus> {
        self.wait_for(timeout, |t| {
            t.status(id).is_none_or(|s| {
                matches!(
                    s.state,
                    TaskManagerState::Failed(_) | TaskManagerState::Stopped
                )
            })
        })
        .await;
        self.status(id)
    }

    fn status(&self, id: &str) -> Result<TaskManagerStatus> {
        self.with_table(|t| t.status(id))?
            .ok_or_else(|| Error::Supervisor(format!("no TaskManager {id}")))
    }

    pub fn list(&self) -> Result<Vec<TaskManagerStatus>> {
        self.with_table(|t| t.statuses())
    }

    /// Agent shutdown: stops child TaskManagers (waiting up to the grace period and the
    /// kill); leaves systemd ones running.
    pub async fn shutdown(&self) {
        if self.backend.outlives_agent() {
            info!("leaving systemd TaskManagers running");
            return;
        }
        let Ok(actions) = self.with_table(|t| t.stop_all(now_ms())) else {
            return;
        };
        if let Err(e) = self.run(actions).await {
            warn!(error = %e, "stopping TaskManagers on shutdown");
        }
        self.wait_for(self.stop_grace + Duration::from_secs(10), |t| !t.any_live())
            .await;
    }
}

async fn drive(
    supervisor: Weak<Supervisor>,
    mut events: mpsc::UnboundedReceiver<Event>,
    tick: Duration,
) {
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            e = events.recv() => match e { Some(e) => Some(e), None => return },
            _ = interval.tick() => None,
        };
        let Some(supervisor) = supervisor.upgrade() else {
            return;
        };
        let is_tick = event.is_none();
        let actions = supervisor.with_table(|t| match event {
            Some(Event::Exited { id, pid, exit }) => {
                info!(%id, ?pid, %exit, "TaskManager process ended");
                t.exited(&id, pid, exit)
            }
            Some(Event::Respawned { id, pid }) => {
                info!(%id, pid, "TaskManager was restarted by its service manager");
                t.respawned(&id, pid, now_ms());
                vec![]
            }
            None => t.tick(now_ms()),
        });
        match actions {
            Ok(actions) => {
                if let Err(e) = supervisor.run(actions).await {
                    warn!(error = %e, "supervisor action failed");
                }
            }
            Err(e) => warn!(error = %e, "supervisor state unavailable"),
        }
        if is_tick {
            supervisor.backend.poll().await;
        }
    }
}

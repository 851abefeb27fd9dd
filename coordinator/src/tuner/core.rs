//! The live loop's sans-IO core for one job: readings of production in, the policy's actions out
//! as [`Command`]s for the shell, outcomes back in. Time is the wall clock in milliseconds, passed
//! in; the policy sees it as a [`Duration`] since the core's first reading.
//!
//! Rules the core enforces, so no policy has to:
//! - one reconfiguration at a time: a second one asked for while one runs is answered at once
//!   as refused (nothing changed), as the twin does;
//! - production wins over profiling: a reconfiguration asked for while a batch runs recalls the
//!   batch first; a batch asked for while a reconfiguration or another batch runs is answered at
//!   once with no results;
//! - downtime is what production showed: the periods read as not running between the order and
//!   its outcome.

use std::collections::VecDeque;
use std::time::Duration;

use demeter_common::metrics::JvmSample;

use crate::flink::JobMetricsSnapshot;
use crate::models::observations::Observation;
use crate::models::space::JobConfig;
use crate::observe::{PeriodExtras, job_tick};
use crate::policy::{Action, ForecastSummary, JobPhase, JobTick, Policy, ReconfigureOutcome};
use crate::profiler::Resources;

/// A policy that can live in the daemon's tasks.
pub type SendPolicy = Box<dyn Policy + Send>;

/// What one poll of production saw.
#[derive(Debug, Clone)]
pub struct Reading {
    /// The configuration deployed now (the journal's current deployment).
    pub config: JobConfig,
    /// None when Flink did not answer for the deployed job (restarting, gone, unreachable).
    pub snapshot: Option<JobMetricsSnapshot>,
    pub fully_running: bool,
    /// The job's latency metric (max over the vertices and subtasks reporting it).
    pub latency_p95_ms: Option<f64>,
    /// Records waiting at the sources (`pendingRecords`), if reported.
    pub backlog: Option<f64>,
    /// What the sources are asked to emit (a source gauge such as the benchmark job's
    /// `targetRateTotal`), if the job reports one: better than emitted + backlog growth when the
    /// source drops what it cannot emit.
    pub offered_rate: Option<f64>,
    /// Latest agent samples of the job's TaskManagers.
    pub jvms: Vec<JvmSample>,
}

/// What the shell must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Carry out the policy's action: a reconfiguration through the executor (one operation at
    /// a time), or a profiling batch reported back with [`TunerCore::handle_profiled`].
    Carry(Box<Action>),
    /// Tear the running batch down now: production needs the resources.
    Recall { batch: u64, reason: String },
}

/// The last tick and the running totals, for live views and comparisons between policies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveView {
    pub at_ms: u64,
    pub tick: JobTick,
    pub forecast: Option<ForecastSummary>,
    pub reconfiguring: Option<JobConfig>,
    pub profiling: Option<u64>,
    pub totals: Totals,
}

/// What production cost and how it served, summed over the readings since the loop started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub observed_s: f64,
    /// Seconds read as not running (reconfigurations, failures).
    pub down_s: f64,
    /// Seconds running with p95 latency over the QoS.
    pub over_qos_s: f64,
    /// Allocated CPU cores × seconds and memory GiB × seconds of the deployed configuration (what
    /// the cluster reserves for the job, the cost the policies compete on).
    pub cpu_core_s: f64,
    pub memory_gib_s: f64,
    /// The same for the profiling copies' TaskManagers while a batch is in flight, counted as
    /// ordered (a copy left out for room still counts: an upper bound). Beside production's,
    /// they are what Demeter costs against a configuration that never changes.
    pub profiling_cpu_core_s: f64,
    pub profiling_memory_gib_s: f64,
    pub reconfigurations: u32,
    pub profiling_batches: u32,
}

/// A policy answering a refusal with the same action again must not spin the loop.
const MAX_ACTIONS_PER_STEP: usize = 32;

/// After a stop (a restart, a rescale, a failure) a source's offered-rate gauge reads 0 until
/// its reader emits again: readings this soon after the job ran again carry the last known rate.
pub const RATE_SETTLE_S: f64 = 15.0;

/// Production running this many seconds in a row over the latency QoS while a profiling batch
/// runs recalls the batch: on a shared host the copies may be what slows production, and
/// production always wins. Longer than the job's p95 window (10 s in the benchmark): one
/// hiccup (a copy's JVM starting, a GC) keeps the p95 high for that long, and 5 s recalled
/// batches on a 2-core machine that production then carried without trouble.
pub const RECALL_AFTER_OVER_QOS_S: f64 = 15.0;

pub struct TunerCore {
    policy: SendPolicy,
    qos_latency_ms: f64,
    totals: Totals,
    origin_ms: Option<u64>,
    previous: Option<(u64, Option<f64>)>,
    reconfiguring: Option<Reconfiguring>,
    profiling: Option<u64>,
    /// Cores and GiB the batch in flight ordered for its copies' TaskManagers.
    profiling_allocation: (f64, f64),
    /// Seconds in a row production ran over the QoS while the batch ran (None once recalled).
    over_while_profiling: Option<f64>,
    commands: VecDeque<Command>,
    last: Option<LiveView>,
    /// The last offered rate read while the job ran settled, and seconds since it last ran.
    last_rate: Option<f64>,
    running_for_s: f64,
}

#[derive(Debug, Clone, Copy)]
struct Reconfiguring {
    to: JobConfig,
    down_ms: u64,
}

impl std::fmt::Debug for TunerCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunerCore")
            .field("policy", &self.policy.name())
            .field("reconfiguring", &self.reconfiguring)
            .field("profiling", &self.profiling)
            .finish_non_exhaustive()
    }
}

impl TunerCore {
    /// `qos_latency_ms` only counts the seconds over it for the totals; the policy has its own.
    pub fn new(policy: SendPolicy, qos_latency_ms: f64) -> Self {
        Self {
            policy,
            qos_latency_ms,
            totals: Totals::default(),
            origin_ms: None,
            previous: None,
            reconfiguring: None,
            profiling: None,
            profiling_allocation: (0.0, 0.0),
            over_while_profiling: None,
            commands: VecDeque::new(),
            last: None,
            last_rate: None,
            running_for_s: 0.0,
        }
    }

    pub fn policy_name(&self) -> &str {
        self.policy.name()
    }

    fn policy_now(&mut self, now_ms: u64) -> Duration {
        let origin = *self.origin_ms.get_or_insert(now_ms);
        Duration::from_millis(now_ms.saturating_sub(origin))
    }

    /// One poll of production ended at `now_ms`.
    pub fn handle_reading(&mut self, now_ms: u64, reading: &Reading) {
        let (period_s, previous_backlog) = match self.previous {
            Some((at, backlog)) if now_ms > at => ((now_ms - at) as f64 / 1000.0, backlog),
            _ => (0.0, None),
        };
        self.previous = Some((now_ms, reading.backlog));
        let tick = match &reading.snapshot {
            Some(snapshot) => {
                let extras = PeriodExtras {
                    latency_p95_ms: reading.latency_p95_ms,
                    backlog: reading.backlog,
                    previous_backlog,
                    period_s,
                    fully_running: reading.fully_running,
                };
                let jvms: Vec<&JvmSample> = reading.jvms.iter().collect();
                let mut tick = job_tick(snapshot, &extras, reading.config, &jvms);
                if let Some(offered) = reading.offered_rate.filter(|r| r.is_finite() && *r >= 0.0) {
                    tick.rate = offered;
                }
                tick
            }
            None => JobTick {
                phase: JobPhase::Down,
                config: reading.config,
                rate: reading.offered_rate.unwrap_or(0.0),
                busy_fraction: None,
                latency_p95_ms: None,
                backlog: reading.backlog.unwrap_or(0.0),
                cpu_cores: 0.0,
                memory_mb: 0.0,
            },
        };
        let mut tick = tick;
        self.settle_rate(&mut tick, period_s);
        if let Some(r) = self.reconfiguring.as_mut()
            && tick.phase == JobPhase::Down
        {
            r.down_ms += (period_s * 1000.0) as u64;
        }
        self.count(&tick, period_s);
        self.guard_production(&tick, period_s);
        let now = self.policy_now(now_ms);
        self.policy.handle_observation(now, &tick);
        self.last = Some(LiveView {
            at_ms: now_ms,
            tick,
            forecast: self.policy.forecast(),
            reconfiguring: self.reconfiguring.map(|r| r.to),
            profiling: self.profiling,
            totals: self.totals,
        });
        self.drain(now_ms);
    }

    /// The input does not stop while the job does: while it is down, and for a few seconds
    /// after it runs again (gauges restart at 0), the policy sees the last settled rate rather
    /// than a dip to zero that would teach the forecaster a trough that never happened.
    fn settle_rate(&mut self, tick: &mut JobTick, period_s: f64) {
        match tick.phase {
            JobPhase::Down => self.running_for_s = 0.0,
            JobPhase::Running => self.running_for_s += period_s,
        }
        if self.running_for_s > RATE_SETTLE_S {
            self.last_rate = Some(tick.rate);
        } else if let Some(rate) = self.last_rate {
            tick.rate = rate;
        }
    }

    fn guard_production(&mut self, tick: &JobTick, period_s: f64) {
        let (Some(batch), Some(over)) = (self.profiling, self.over_while_profiling.as_mut()) else {
            return;
        };
        let slow = tick.phase == JobPhase::Running
            && tick.latency_p95_ms.is_some_and(|l| l > self.qos_latency_ms);
        *over = if slow { *over + period_s } else { 0.0 };
        if *over >= RECALL_AFTER_OVER_QOS_S {
            self.over_while_profiling = None;
            self.commands.push_back(Command::Recall {
                batch,
                reason: format!(
                    "production's p95 latency over the QoS for {RECALL_AFTER_OVER_QOS_S:.0} s while profiling"
                ),
            });
        }
    }

    fn count(&mut self, tick: &JobTick, period_s: f64) {
        let t = &mut self.totals;
        t.observed_s += period_s;
        match tick.phase {
            JobPhase::Down => t.down_s += period_s,
            JobPhase::Running => {
                if tick.latency_p95_ms.is_some_and(|l| l > self.qos_latency_ms) {
                    t.over_qos_s += period_s;
                }
            }
        }
        t.cpu_core_s += tick.config.total_cpu_cores() * period_s;
        t.memory_gib_s += tick.config.total_memory_mb() / 1024.0 * period_s;
        if self.profiling.is_some() {
            let (cores, gib) = self.profiling_allocation;
            t.profiling_cpu_core_s += cores * period_s;
            t.profiling_memory_gib_s += gib * period_s;
        }
    }

    /// Lets the policy act on its own deadlines.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let now = self.policy_now(now_ms);
        if self.policy.poll_timeout().is_some_and(|d| d <= now) {
            self.policy.handle_timeout(now);
        }
        self.drain(now_ms);
    }

    /// The reconfiguration ordered last ended: `running` is what runs now (the target, or the
    /// previous configuration after a rollback or a refusal).
    pub fn handle_reconfigured(&mut self, now_ms: u64, running: JobConfig, succeeded: bool) {
        let Some(r) = self.reconfiguring.take() else {
            return;
        };
        let outcome = ReconfigureOutcome {
            running: if succeeded { r.to } else { running },
            succeeded,
            downtime_s: r.down_ms as f64 / 1000.0,
        };
        let now = self.policy_now(now_ms);
        self.policy.handle_reconfigured(now, &outcome);
        self.drain(now_ms);
    }

    /// What a profiling copy's TaskManagers could get now beside production.
    pub fn handle_profiling_room(&mut self, now_ms: u64, room: Resources) {
        let now = self.policy_now(now_ms);
        self.policy.handle_profiling_room(now, room);
        self.drain(now_ms);
    }

    /// The profiling batch ordered last ended with these measurements.
    pub fn handle_profiled(&mut self, now_ms: u64, batch: u64, results: &[Observation]) {
        if self.profiling == Some(batch) {
            self.profiling = None;
        }
        let now = self.policy_now(now_ms);
        self.policy.handle_profile_results(now, batch, results);
        self.drain(now_ms);
    }

    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// Wall-clock ms at which [`TunerCore::handle_timeout`] is due, if the policy asked.
    pub fn poll_timeout_ms(&self) -> Option<u64> {
        let origin = self.origin_ms?;
        self.policy
            .poll_timeout()
            .map(|d| origin + d.as_millis() as u64)
    }

    pub fn live(&self) -> Option<LiveView> {
        self.last
    }

    fn current_config(&self) -> Option<JobConfig> {
        self.last.map(|v| v.tick.config)
    }

    fn drain(&mut self, now_ms: u64) {
        for _ in 0..MAX_ACTIONS_PER_STEP {
            let Some(action) = self.policy.poll_action() else {
                return;
            };
            let now = self.policy_now(now_ms);
            match action {
                Action::Reconfigure { to, kind, decision } => {
                    if self.reconfiguring.is_some() {
                        let from = self.current_config().unwrap_or(to);
                        tracing::debug!(%to, "a reconfiguration is running; refusing another");
                        let refused = ReconfigureOutcome {
                            running: from,
                            succeeded: false,
                            downtime_s: 0.0,
                        };
                        self.policy.handle_reconfigured(now, &refused);
                        continue;
                    }
                    if let Some(batch) = self.profiling {
                        self.commands.push_back(Command::Recall {
                            batch,
                            reason: format!("production moves to {to}"),
                        });
                    }
                    self.reconfiguring = Some(Reconfiguring { to, down_ms: 0 });
                    self.totals.reconfigurations += 1;
                    self.commands
                        .push_back(Command::Carry(Box::new(Action::Reconfigure {
                            to,
                            kind,
                            decision,
                        })));
                }
                Action::Profile {
                    batch,
                    candidates,
                    rate,
                    decision,
                } => {
                    if self.profiling.is_some() || self.reconfiguring.is_some() {
                        tracing::debug!(batch, "busy; profiling batch answered with no results");
                        self.policy.handle_profile_results(now, batch, &[]);
                        continue;
                    }
                    self.profiling = Some(batch);
                    self.profiling_allocation = candidates.iter().fold((0.0, 0.0), |(c, m), k| {
                        (c + k.total_cpu_cores(), m + k.total_memory_mb() / 1024.0)
                    });
                    self.over_while_profiling = Some(0.0);
                    self.totals.profiling_batches += 1;
                    self.commands
                        .push_back(Command::Carry(Box::new(Action::Profile {
                            batch,
                            candidates,
                            rate,
                            decision,
                        })));
                }
            }
        }
        tracing::warn!(
            limit = MAX_ACTIONS_PER_STEP,
            "policy kept acting within one step; the rest waits for the next"
        );
    }
}

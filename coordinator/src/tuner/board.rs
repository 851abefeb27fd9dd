//! What the daemon shows about tuned jobs: the live loops publish their latest [`LiveView`]
//! here, and `job tuning NAME` reads it with the newest decisions from the [`DecisionLog`].

use std::collections::HashMap;
use std::sync::Mutex;

use demeter_common::protocol::tuning::{DecisionLine, LiveLine, LiveTotals, TuningView};

use super::core::LiveView;
use super::log::{DecisionEntry, DecisionLog};
use crate::executor::service::TuningViews;
use crate::policy::{CandidateNumbers, JobPhase, Reason};

#[derive(Debug)]
pub struct Board {
    log: DecisionLog,
    /// Job → (policy, latest view).
    live: Mutex<HashMap<String, (String, Option<LiveView>)>>,
}

impl Board {
    pub fn new(log: DecisionLog) -> Self {
        Self {
            log,
            live: Mutex::new(HashMap::new()),
        }
    }

    pub fn log(&self) -> &DecisionLog {
        &self.log
    }

    /// Marks `job` as tuned by `policy` (before its first reading).
    pub fn tuned(&self, job: &str, policy: &str) {
        if let Ok(mut live) = self.live.lock() {
            live.insert(job.to_string(), (policy.to_string(), None));
        }
    }

    pub fn publish(&self, job: &str, view: LiveView) {
        if let Ok(mut live) = self.live.lock()
            && let Some(entry) = live.get_mut(job)
        {
            entry.1 = Some(view);
        }
    }
}

impl TuningViews for Board {
    fn view(&self, job: &str, last: u32) -> Result<TuningView, String> {
        let (policy, live) = self
            .live
            .lock()
            .map_err(|_| "tuning state poisoned".to_string())?
            .get(job)
            .cloned()
            .map_or((None, None), |(p, v)| (Some(p), v));
        let decisions = self
            .log
            .recent(job, last as usize)
            .map_err(|e| e.to_string())?
            .iter()
            .map(decision_line)
            .collect();
        Ok(TuningView {
            job: job.to_string(),
            policy,
            live: live.map(|v| live_line(&v)),
            decisions,
        })
    }
}

fn live_line(v: &LiveView) -> LiveLine {
    LiveLine {
        at_ms: v.at_ms,
        phase: match v.tick.phase {
            JobPhase::Running => "Running".into(),
            JobPhase::Down => "Down".into(),
        },
        config: v.tick.config.to_string(),
        rate: v.tick.rate,
        latency_p95_ms: v.tick.latency_p95_ms,
        busy_fraction: v.tick.busy_fraction,
        cpu_cores: v.tick.cpu_cores,
        memory_mb: v.tick.memory_mb,
        forecast: v.forecast.map(|f| (f.horizon_s, f.point_max, f.upper_max)),
        reconfiguring: v.reconfiguring.map(|c| c.to_string()),
        profiling: v.profiling,
        totals: LiveTotals {
            observed_s: v.totals.observed_s,
            down_s: v.totals.down_s,
            over_qos_s: v.totals.over_qos_s,
            cpu_core_s: v.totals.cpu_core_s,
            memory_gib_s: v.totals.memory_gib_s,
            profiling_cpu_core_s: v.totals.profiling_cpu_core_s,
            profiling_memory_gib_s: v.totals.profiling_memory_gib_s,
            reconfigurations: v.totals.reconfigurations,
            profiling_batches: v.totals.profiling_batches,
        },
    }
}

/// The reason in words an operator reads.
pub fn reason_text(reason: &Reason) -> String {
    match reason {
        Reason::ProfileUncertain { miss_probability } => format!(
            "the model knows too little: P(missing a cheaper feasible configuration) = {miss_probability:.2}"
        ),
        Reason::ProfileShape { candidate } => format!(
            "{candidate} is predicted feasible but its TaskManager shape was never measured, and \
             no full-size copy fits: the shape is profiled on fewer TaskManagers"
        ),
        Reason::Cheaper { saving } => format!(
            "a feasible configuration costs {:.0} % less, enough to pay for the change",
            saving * 100.0
        ),
        Reason::QosRisk { p_feasible } => {
            format!("QoS at risk soon: P(current configuration meets it) = {p_feasible:.2}")
        }
        Reason::SafeDefault => "nothing known to be feasible: the safe default".into(),
        Reason::Rule(rule) => rule.clone(),
    }
}

fn numbers_text(c: &CandidateNumbers) -> String {
    format!(
        "{} at {:.0}/s: P(feasible) {:.2}, p95 {:.0} ms, recovery {:.0} s, {:.1} cores, {:.0} MiB",
        c.config, c.rate, c.p_feasible, c.latency_p95_ms, c.recovery_s, c.cpu_cores, c.memory_mb
    )
}

fn decision_line(e: &DecisionEntry) -> DecisionLine {
    let d = &e.decision;
    DecisionLine {
        seq: e.seq,
        at_ms: e.at_ms,
        policy: e.policy.clone(),
        action: e.action.clone(),
        reason: reason_text(&d.reason),
        forecast: d.forecast.map(|f| {
            format!(
                "max over {} s: {:.0}/s (upper {:.0}/s)",
                f.horizon_s, f.point_max, f.upper_max
            )
        }),
        chosen: d.chosen.as_ref().map(numbers_text),
        rejected: d
            .best_rejected
            .as_ref()
            .map(|(c, why)| format!("{}: {why}", numbers_text(c))),
        outcome: e.outcome.clone(),
    }
}

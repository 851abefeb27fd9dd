use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::core::{Command, RECALL_AFTER_OVER_QOS_S, Reading, TunerCore};
use crate::flink::{JobId, JobMetricsSnapshot, JobState};
use crate::models::observations::Observation;
use crate::models::space::JobConfig;
use crate::policy::{
    Action, ChangeKind, Decision, JobPhase, JobTick, Policy, ProfilingRoom, Reason,
    ReconfigureOutcome,
};

/// What the scripted policy was told, in order.
#[derive(Debug, Clone, PartialEq)]
enum Told {
    Tick(Duration, JobTick),
    Reconfigured(Duration, ReconfigureOutcome),
    Profiled(Duration, u64, usize),
}

#[derive(Default)]
struct Scripted {
    told: Arc<Mutex<Vec<Told>>>,
    /// Actions handed out, one batch per `handle_*` call.
    script: Vec<Vec<Action>>,
    pending: Vec<Action>,
}

impl Scripted {
    fn next_batch(&mut self) {
        if !self.script.is_empty() {
            let batch = self.script.remove(0);
            self.pending.extend(batch);
        }
    }
}

impl Policy for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn handle_observation(&mut self, now: Duration, tick: &JobTick) {
        self.told.lock().unwrap().push(Told::Tick(now, *tick));
        self.next_batch();
    }
    fn handle_profiling_room(&mut self, _now: Duration, _room: ProfilingRoom) {}

    fn handle_profile_results(&mut self, now: Duration, batch: u64, results: &[Observation]) {
        self.told
            .lock()
            .unwrap()
            .push(Told::Profiled(now, batch, results.len()));
    }
    fn handle_reconfigured(&mut self, now: Duration, outcome: &ReconfigureOutcome) {
        self.told
            .lock()
            .unwrap()
            .push(Told::Reconfigured(now, *outcome));
    }
    fn handle_timeout(&mut self, _now: Duration) {}
    fn poll_timeout(&self) -> Option<Duration> {
        None
    }
    fn poll_action(&mut self) -> Option<Action> {
        (!self.pending.is_empty()).then(|| self.pending.remove(0))
    }
}

fn config(text: &str) -> JobConfig {
    text.parse().unwrap()
}

fn decision() -> Decision {
    Decision {
        at: Duration::ZERO,
        reason: Reason::Rule("test".into()),
        forecast: None,
        chosen: None,
        best_rejected: None,
    }
}

fn reconfigure(to: &str) -> Action {
    Action::Reconfigure {
        to: config(to),
        kind: ChangeKind::InPlace,
        decision: decision(),
    }
}

fn profile(batch: u64) -> Action {
    Action::Profile {
        batch,
        candidates: vec![config("p=2,slots=1,mem=1024m,cpu=1,ckpt=10s")],
        rate: 500.0,
        decision: decision(),
    }
}

fn reading(running: bool, emitted: f64, offered: Option<f64>) -> Reading {
    let snapshot = JobMetricsSnapshot {
        job_id: JobId("j".into()),
        state: if running {
            JobState::Running
        } else {
            JobState::Restarting
        },
        input_rate: Some(emitted),
        vertices: Vec::new(),
        num_restarts: None,
        uptime_ms: None,
        last_checkpoint_duration_ms: None,
        last_checkpoint_size_bytes: None,
        completed_checkpoints: None,
        failed_checkpoints: None,
        checkpoint_duration_ms: None,
    };
    Reading {
        config: config("p=1,slots=1,mem=1024m,cpu=1,ckpt=10s"),
        snapshot: Some(snapshot),
        fully_running: running,
        latency_p95_ms: Some(80.0),
        backlog: None,
        offered_rate: offered,
        jvms: Vec::new(),
    }
}

fn core(script: Vec<Vec<Action>>) -> (TunerCore, Arc<Mutex<Vec<Told>>>) {
    let told = Arc::new(Mutex::new(Vec::new()));
    let policy = Scripted {
        told: told.clone(),
        script,
        pending: Vec::new(),
    };
    (TunerCore::new(Box::new(policy), 100.0), told)
}

fn commands(core: &mut TunerCore) -> Vec<Command> {
    std::iter::from_fn(|| core.poll_command()).collect()
}

#[test]
fn ticks_carry_policy_time_and_the_offered_rate() {
    let (mut core, told) = core(vec![]);
    core.handle_reading(50_000, &reading(true, 400.0, None));
    core.handle_reading(51_000, &reading(true, 400.0, Some(650.0)));
    core.handle_reading(52_000, &reading(false, 0.0, None));
    let told = told.lock().unwrap();
    let ticks: Vec<(Duration, f64, JobPhase)> = told
        .iter()
        .filter_map(|t| match t {
            Told::Tick(at, tick) => Some((*at, tick.rate, tick.phase)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ticks,
        vec![
            (Duration::ZERO, 400.0, JobPhase::Running),
            (Duration::from_secs(1), 650.0, JobPhase::Running),
            (Duration::from_secs(2), 0.0, JobPhase::Down),
        ]
    );
}

#[test]
fn a_second_reconfiguration_is_refused_and_downtime_is_what_production_showed() {
    let (mut core, told) = core(vec![
        vec![reconfigure("p=2,slots=1,mem=1024m,cpu=1,ckpt=10s")],
        vec![reconfigure("p=3,slots=1,mem=1024m,cpu=1,ckpt=10s")],
    ]);
    core.handle_reading(0, &reading(true, 400.0, None));
    let first = commands(&mut core);
    assert!(
        matches!(first.as_slice(), [Command::Carry(a)] if matches!(**a, Action::Reconfigure { to, .. } if to.parallelism == 2))
    );
    core.handle_reading(1_000, &reading(false, 0.0, None));
    assert!(commands(&mut core).is_empty(), "refused, not queued");
    core.handle_reading(2_000, &reading(false, 0.0, None));
    core.handle_reading(3_000, &reading(true, 400.0, None));
    core.handle_reconfigured(3_500, config("p=1,slots=1,mem=1024m,cpu=1,ckpt=10s"), true);
    let told = told.lock().unwrap();
    let outcomes: Vec<&ReconfigureOutcome> = told
        .iter()
        .filter_map(|t| match t {
            Told::Reconfigured(_, o) => Some(o),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes.len(), 2);
    assert!(!outcomes[0].succeeded, "the second order was refused");
    assert_eq!(outcomes[0].running.parallelism, 1);
    assert!(outcomes[1].succeeded);
    assert_eq!(outcomes[1].running.parallelism, 2);
    assert_eq!(outcomes[1].downtime_s, 2.0, "two periods read as down");
    let totals = core.live().unwrap().totals;
    assert_eq!(totals.observed_s, 3.0);
    assert_eq!(totals.down_s, 2.0);
    assert_eq!(
        totals.reconfigurations, 1,
        "the refused order is not counted"
    );
    assert_eq!(
        totals.cpu_core_s, 3.0,
        "one 1-core TaskManager for three seconds"
    );
}

#[test]
fn production_recalls_a_running_batch_and_busy_batches_get_no_results() {
    let (mut core, told) = core(vec![
        vec![profile(7)],
        vec![profile(8)],
        vec![reconfigure("p=2,slots=1,mem=1024m,cpu=1,ckpt=10s")],
    ]);
    core.handle_reading(0, &reading(true, 400.0, None));
    assert!(matches!(
        commands(&mut core).as_slice(),
        [Command::Carry(a)] if matches!(**a, Action::Profile { batch: 7, .. })
    ));
    core.handle_reading(1_000, &reading(true, 400.0, None));
    assert!(commands(&mut core).is_empty());
    assert!(
        told.lock()
            .unwrap()
            .contains(&Told::Profiled(Duration::from_secs(1), 8, 0))
    );
    core.handle_reading(2_000, &reading(true, 400.0, None));
    let cmds = commands(&mut core);
    assert!(matches!(
        cmds.as_slice(),
        [Command::Recall { batch: 7, .. }, Command::Carry(a)] if matches!(**a, Action::Reconfigure { .. })
    ));
    core.handle_profiled(2_500, 7, &[]);
    assert!(core.live().is_some());
}

#[test]
fn production_over_the_qos_while_profiling_recalls_the_batch_once() {
    let (mut core, _) = core(vec![vec![profile(3)]]);
    core.handle_reading(0, &reading(true, 400.0, None));
    assert_eq!(commands(&mut core).len(), 1, "the batch");
    let mut slow = reading(true, 400.0, None);
    slow.latency_p95_ms = Some(150.0);
    let needed = RECALL_AFTER_OVER_QOS_S as u64;
    for s in 1..needed {
        core.handle_reading(s * 1_000, &slow);
    }
    core.handle_reading(needed * 1_000, &reading(true, 400.0, None));
    assert!(
        commands(&mut core).is_empty(),
        "one slow second short of the limit, then a good one"
    );
    let again = needed + 1;
    for s in again..again + needed {
        core.handle_reading(s * 1_000, &slow);
    }
    let cmds = commands(&mut core);
    assert!(
        matches!(cmds.as_slice(), [Command::Recall { batch: 3, .. }]),
        "{cmds:?}"
    );
    for s in again + needed..again + 2 * needed {
        core.handle_reading(s * 1_000, &slow);
    }
    assert!(commands(&mut core).is_empty(), "recalled once");
}

#[test]
fn the_rate_carries_over_a_stop_until_the_gauges_settle() {
    let (mut core, told) = core(vec![]);
    for s in 0..20 {
        core.handle_reading(s * 1_000, &reading(true, 400.0, Some(400.0)));
    }
    core.handle_reading(20_000, &reading(false, 0.0, Some(0.0)));
    for s in 21..=45 {
        core.handle_reading(s * 1_000, &reading(true, 0.0, Some(0.0)));
    }
    let rates: Vec<f64> = told
        .lock()
        .unwrap()
        .iter()
        .filter_map(|t| match t {
            Told::Tick(_, tick) => Some(tick.rate),
            _ => None,
        })
        .collect();
    assert_eq!(rates[20], 400.0, "down: the input goes on");
    assert_eq!(rates[25], 400.0, "gauges restarting at 0 are not a trough");
    assert_eq!(
        rates[45], 0.0,
        "a zero that lasts past the settling time is real"
    );
}

#[test]
fn a_batch_in_flight_counts_its_copies_allocation_until_it_reports() {
    let (mut core, _) = core(vec![vec![profile(4)]]);
    core.handle_reading(0, &reading(true, 400.0, None));
    assert_eq!(commands(&mut core).len(), 1, "the batch");
    for s in 1..=3 {
        core.handle_reading(s * 1_000, &reading(true, 400.0, None));
    }
    core.handle_profiled(3_500, 4, &[]);
    core.handle_reading(4_000, &reading(true, 400.0, None));
    let totals = core.live().unwrap().totals;
    assert_eq!(
        (totals.profiling_cpu_core_s, totals.profiling_memory_gib_s),
        (6.0, 6.0),
        "two 1-core, 1 GiB TaskManagers for the three seconds read while the batch ran"
    );
    assert_eq!(
        totals.cpu_core_s, 4.0,
        "production's own allocation is apart"
    );
}

//! `static`: what an operator who provisions for the peak runs — one configuration, never
//! changed. Every cost in the benchmark is relative to it.

use std::time::Duration;

use crate::models::observations::Observation;
use crate::policy::{Action, JobTick, Policy, ProfilingRoom, ReconfigureOutcome};

/// Never acts; production keeps the configuration it was started in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fixed;

impl Policy for Fixed {
    fn name(&self) -> &str {
        "static"
    }

    fn handle_observation(&mut self, _now: Duration, _tick: &JobTick) {}

    fn handle_profiling_room(&mut self, _now: Duration, _room: ProfilingRoom) {}

    fn handle_profile_results(&mut self, _now: Duration, _batch: u64, _results: &[Observation]) {}

    fn handle_reconfigured(&mut self, _now: Duration, _outcome: &ReconfigureOutcome) {}

    fn handle_timeout(&mut self, _now: Duration) {}

    fn poll_timeout(&self) -> Option<Duration> {
        None
    }

    fn poll_action(&mut self) -> Option<Action> {
        None
    }
}

//! Crash points for crash-safety tests, read from `DEMETER_FAILPOINT` by the `job` CLI (local
//! mode) and the daemon: `after-step:<step>` SIGKILLs the process right after the journal
//! recorded `<step>` as done; `in-step:<step>` right after the step's first action was carried
//! out, before its answer is journaled. Steps: stop, resolve-stop, taskmanagers,
//! wait-taskmanagers, submit, wait-running, rescale, stop-new, cancel-new, restore-point.

use demeter_coordinator::executor::driver::Observer;
use demeter_coordinator::executor::{Effect, Operation, Step};

#[derive(Debug, Default)]
pub struct Failpoint {
    point: Option<String>,
}

impl Failpoint {
    pub fn from_env() -> Self {
        let point = std::env::var("DEMETER_FAILPOINT")
            .ok()
            .filter(|f| !f.is_empty());
        if let Some(point) = &point {
            tracing::warn!(%point, "failpoint armed: this process will SIGKILL itself there");
        }
        Self { point }
    }

    fn crash_if(&self, point: &str) {
        if self.point.as_deref() == Some(point) {
            eprintln!("failpoint {point}: SIGKILL");
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    }
}

impl Observer for Failpoint {
    fn journaled(&self, _op: &Operation, finished: Option<Step>) {
        if let Some(step) = finished {
            self.crash_if(&format!("after-step:{}", step.name()));
        }
    }

    fn effect_done(&self, op: &Operation, _effect: &Effect) {
        self.crash_if(&format!("in-step:{}", op.step.name()));
    }
}

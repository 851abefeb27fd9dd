//! The agent side of `profiling_flink.rs`: an in-process ingest server (what the daemon runs)
//! with ONE real `demeter-agent` (child backend) connected, whose `[supervisor.clusters]` has
//! only the production cluster's paths — the copies' TaskManagers join their own JobManagers
//! through the dynamic properties `AgentHost` adds. Also the phase log of a batch's copies.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use demeter_common::protocol::{OrderKind, OrderOutcome, Role, TaskManagerStatus};
use demeter_coordinator::ingest::{Ingest, IngestHandle};
use demeter_coordinator::profiler::batch::Progress;
use demeter_coordinator::profiler::{CopyReport, Phase};
use demeter_tests::process::{Daemon, start_agent_with, start_ingest};
use demeter_tests::{Pki, Scratch};

pub const AGENT: &str = "prof-node";

pub struct AgentRig {
    pub ingest: Ingest,
    pub agent: Daemon,
    _scratch: Scratch,
}

impl AgentRig {
    /// Ingest up, the agent connected and its first sample in; `cluster` is the agents'
    /// cluster name, mapped to the paths of the lab cluster whose `env` is given.
    pub async fn start(cluster: &str, env: &BTreeMap<String, String>) -> Self {
        let scratch = Scratch::new("profiling-agent");
        let pki = Pki::new(&scratch.path.join("pki"));
        pki.issue(AGENT, Role::Agent);
        let ingest = start_ingest(&scratch.path, &pki);
        let port = ingest.local_addr().unwrap().port();
        let supervisor = format!(
            "[supervisor]\nbackend = \"child\"\nstop_grace_ms = 5000\n\
             [supervisor.clusters.{cluster}]\nflink_home = \"{}\"\nconf_dir = \"{}\"\nlog_dir = \"{}\"\npid_dir = \"{}\"\n",
            env["FLINK_HOME"], env["FLINK_CONF_DIR"], env["FLINK_LOG_DIR"], env["FLINK_PID_DIR"]
        );
        let agent = start_agent_with(&scratch.path, &pki, AGENT, port, 1000, &supervisor);
        let rig = Self {
            ingest,
            agent,
            _scratch: scratch,
        };
        let started = Instant::now();
        while !rig
            .handle()
            .latest_samples()
            .iter()
            .any(|(name, _)| name == AGENT)
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the agent sent no sample: {}",
                rig.agent.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        rig
    }

    pub fn handle(&self) -> IngestHandle {
        self.ingest.handle()
    }

    /// Every TaskManager the agent manages (running or ended).
    pub async fn taskmanagers(&self) -> Vec<TaskManagerStatus> {
        let result = self
            .handle()
            .send_order(AGENT, OrderKind::ListTaskManagers, Duration::from_secs(30))
            .await
            .unwrap();
        match result.outcome {
            OrderOutcome::TaskManagers(list) => list,
            other => panic!("ListTaskManagers answered {other:?}"),
        }
    }
}

/// When each copy entered each phase, ms since the copy started.
#[derive(Debug, Default)]
pub struct PhaseLog {
    pub phases: Mutex<Vec<(String, Phase, u64)>>,
}

impl PhaseLog {
    fn at(&self, copy: &str, phase: Phase) -> Option<u64> {
        self.phases
            .lock()
            .unwrap()
            .iter()
            .find(|(c, p, _)| c == copy && *p == phase)
            .map(|(_, _, at)| *at)
    }

    /// Start (provision → warming up), measurement window, and tear-down (→ finished) of
    /// `report`'s copy, in seconds.
    pub fn durations(&self, report: &CopyReport) -> (f64, f64, f64) {
        let s = |a: Option<u64>, b: Option<u64>| {
            a.zip(b)
                .map_or(f64::NAN, |(a, b)| b.saturating_sub(a) as f64 / 1000.0)
        };
        let name = &report.name;
        let torn = self.at(name, Phase::TearingDown);
        let done = Some(report.finished_ms.saturating_sub(report.started_ms));
        (
            s(Some(0), self.at(name, Phase::WarmingUp)),
            s(
                self.at(name, Phase::Measuring),
                self.at(name, Phase::AwaitingCheckpoint),
            ),
            s(torn, done),
        )
    }
}

impl Progress for PhaseLog {
    fn phase(&self, copy: &str, phase: Phase, since_start_ms: u64) {
        println!(
            "{copy}: {phase:?} at {:.1} s",
            since_start_ms as f64 / 1000.0
        );
        self.phases
            .lock()
            .unwrap()
            .push((copy.to_string(), phase, since_start_ms));
    }

    fn finished(&self, report: &CopyReport) {
        println!("{}: finished {:?}", report.name, report.outcome);
    }
}

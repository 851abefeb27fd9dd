//! The README's first command as a test: `scripts/run-local.sh` starts a real Flink 2.3
//! JobManager, a Demeter agent (running the TaskManagers) and the coordinator daemon with the
//! benchmark job in its `[tuning]` table, replays a compressed real workload trace, and lets the
//! Demeter policy tune the job live. Afterwards, from the daemon's own decision log
//! (`job tuning --json`) and the job's committed output:
//!
//! - the loop ordered at least one profiling batch, and a copy beside production was measured;
//! - the loop ordered at least one reconfiguration on the forecast (a cost saving or a QoS risk
//!   seen ahead, not a rule) and the executor applied it;
//! - the job ran throughout, and its output is exactly-once after the final stop-with-savepoint
//!   and holds what was due by then (the source replays its backlog across every restart).
//!
//! Runs only when `DEMETER_LAB` names an installed lab; ports `DEMETER_TUNING_REST_PORT`
//! (18591) / `DEMETER_TUNING_RPC_PORT` (16591), profiling copies REST 18600-18609 / RPC
//! 16600-16609. The run ends as soon as the decision log shows both (`UNTIL_TUNED`), at the latest
//! after `DEMETER_TUNING_SECONDS` (default 660).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use demeter_common::protocol::tuning::TuningView;
use demeter_tests::lab::Lab;
use demeter_tests::{Scratch, free_udp_port, target_dir};

#[test]
fn demeter_tunes_a_real_flink_job_end_to_end() {
    let lab = match Lab::from_env() {
        Ok(lab) => lab,
        Err(reason) => {
            println!("SKIPPED demeter_tunes_a_real_flink_job_end_to_end: {reason}");
            return;
        }
    };
    let (rest, rpc) = Lab::ports("DEMETER_TUNING", 18591, 16591);
    let seconds = std::env::var("DEMETER_TUNING_SECONDS").unwrap_or_else(|_| "660".into());
    let scratch = Scratch::new("tuning-flink");
    let run = scratch.path.join("run");
    let status = Command::new("bash")
        .arg(lab.repo.join("scripts/run-local.sh"))
        .env("DEMETER_LAB", &lab.dir)
        .env("BIN_DIR", target_dir())
        .env("RUN_DIR", &run)
        .env("CLUSTER", "tuning")
        .env("REST_PORT", rest.to_string())
        .env("RPC_PORT", rpc.to_string())
        .env("DEMETER_PORT", free_udp_port().to_string())
        .env("PROFILE_PORT", "18600")
        .env("DURATION", &seconds)
        .env("NO_VIEW", "1")
        .env("UNTIL_TUNED", "1")
        // The demo's 2-core load, pinned: production, a copy starting beside it and the rest of
        // CI share 2 cores, and a production job that misses its QoS for want of CPU rightly
        // recalls every batch (production wins) and is never scaled down (at 1 ms per record it
        // did).
        .env("WORK_US", "500")
        .env("PROFILE_WARMUP", "20")
        .env("PROFILE_MEASURE", "20")
        .status()
        .unwrap();
    assert!(status.success(), "run-local.sh failed: {status}");

    let view: TuningView =
        serde_json::from_str(&std::fs::read_to_string(run.join("tuning.json")).unwrap()).unwrap();
    assert_eq!(view.policy.as_deref(), Some("demeter"));
    let profiled: Vec<_> = view
        .decisions
        .iter()
        .filter(|d| d.action.starts_with("profile"))
        .collect();
    assert!(
        profiled.iter().any(|d| d
            .outcome
            .as_deref()
            .is_some_and(|o| !o.starts_with("0 measured") && o.contains("measured"))),
        "no profiling batch measured a copy: {profiled:#?}"
    );
    let applied: Vec<_> = view
        .decisions
        .iter()
        .filter(|d| {
            d.action.starts_with("reconfigure")
                && d.outcome
                    .as_deref()
                    .is_some_and(|o| o.starts_with("applied"))
        })
        .collect();
    assert!(
        applied
            .iter()
            .any(|d| d.reason.contains("costs") || d.reason.contains("QoS at risk")),
        "no reconfiguration decided on the forecast was applied: {:#?}",
        view.decisions
    );
    let totals = view.live.expect("the loop read production").totals;
    assert!(
        totals.down_s < 0.2 * totals.observed_s,
        "down {:.0} of {:.0} s",
        totals.down_s,
        totals.observed_s
    );

    let check: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("exactly-once.json")).unwrap())
            .unwrap();
    assert_eq!(check["ok"], true, "output not exactly-once: {check:#}");
    // The source keeps a backlog, so what was due while Demeter restarted the job comes later:
    // only records in windows still open at the final stop may be missing (seconds of a run of
    // minutes). A source that dropped them would lose a restart's worth per change.
    let due: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("due.json")).unwrap()).unwrap();
    let (due_n, committed) = (
        due["due"].as_f64().unwrap(),
        due["committed"].as_f64().unwrap(),
    );
    assert!(
        committed >= 0.85 * due_n,
        "committed {committed} of {due_n} records due by the stop"
    );
    println!(
        "tuned for {:.0} s: {} reconfigurations, {} profiling batches, {:.1} % down, {} records exactly once of {due_n} due",
        totals.observed_s,
        totals.reconfigurations,
        totals.profiling_batches,
        100.0 * totals.down_s / totals.observed_s,
        check["distinct"]
    );
}

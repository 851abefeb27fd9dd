//! The production path of the executor on a real Flink 2.3 cluster: the operator's CLI talks
//! to the coordinator DAEMON over QUIC, the daemon owns the executor, and ONE real agent
//! (child backend) starts and stops every TaskManager on the daemon's orders (the lab runs a
//! JobManager only). Through the daemon:
//!
//! 1. register and first deployment of the benchmark job;
//! 2. an in-place parallelism change;
//! 3. a full restart (memory, slots, checkpoint interval, CPU) during which the daemon
//!    SIGKILLs itself right after the stop-with-savepoint (`DEMETER_FAILPOINT=after-step:stop`,
//!    a point only full restarts pass); restarted, it waits for the agent, resumes, and the job
//!    ends RUNNING in the new configuration;
//! 4. a second full restart back, with a second apply for the same job refused meanwhile;
//! 5. the watchdog: the job is cancelled behind Demeter's back and comes back from its newest
//!    checkpoint;
//!
//! then the daemon stops, a final stop-with-savepoint, and `scripts/check-exactly-once.py`.
//! After each change: Flink lists exactly the configuration's TaskManagers, each a JVM the
//! agent started, in a cgroup with the configuration's CPU quota where the host allows it.
//!
//! Runs only when `DEMETER_LAB` names an installed lab; REST/RPC ports
//! `DEMETER_DAEMON_REST_PORT` (18391) / `DEMETER_DAEMON_RPC_PORT` (16391).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "daemon_flink/support.rs"]
mod support;

use std::time::Duration;

use demeter_common::protocol::jobs::OutcomeSummary;
use demeter_coordinator::executor::driver::now_ms;
use demeter_coordinator::flink::JobId;
use demeter_coordinator::models::space::JobConfig;
use demeter_tests::flink_checks::{
    assert_one_running_and_every_stop_saved, stop_and_check_exactly_once,
};
use demeter_tests::lab::Lab;
use support::{Figures, JOB, Rig, applied, step_ms};

fn cfg(text: &str) -> JobConfig {
    text.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_reconfigures_with_agent_run_taskmanagers() {
    let lab = match Lab::from_env() {
        Ok(lab) => lab,
        Err(reason) => {
            println!("SKIPPED daemon_reconfigures_with_agent_run_taskmanagers: {reason}");
            return;
        }
    };
    let (rest, rpc) = Lab::ports("DEMETER_DAEMON", 18391, 16391);
    let jar = lab.bench_jar();
    // A run interrupted before its guards ran may have left the cluster and TaskManagers with
    // this job's ids (they would register twice): stop whatever uses the cluster's conf dir.
    lab.run(&["stop", "dmn"]);
    let cluster = lab.start("dmn", rest, rpc);
    let t0 = now_ms();
    let mut rig = Rig::new(lab.repo.clone(), &cluster.env, jar, rest, "after-step:stop").await;
    let mut f = Figures::default();
    let mut cancelled = Vec::new();

    // 1. Register and deploy through the daemon.
    rig.register().await;
    let (printed, op) = rig
        .apply(&[
            "--parallelism",
            "1",
            "--slots",
            "2",
            "--tm-memory",
            "1024m",
            "--tm-cpu",
            "0.5",
            "--checkpoint-interval",
            "5s",
        ])
        .await;
    assert_eq!(op.strategy, "Initial");
    assert!(printed.contains("→ taskmanagers") && printed.contains("applied: dmnbench runs"));
    let first = cfg("p=1,slots=2,mem=1024m,cpu=0.5,ckpt=5");
    assert_eq!(cfg(&applied(&op).0), first);
    rig.assert_agent_runs(&first).await;
    f.add(
        "first deployment (agent starts the TaskManager)",
        op.log.last().unwrap().0,
    );

    // 2. In place.
    let (_, before) = rig.current().await;
    let t = now_ms();
    let (_, op) = rig.apply(&["--parallelism", "2"]).await;
    assert_eq!(op.strategy, "InPlace");
    let (config, job) = applied(&op);
    assert_eq!(cfg(&config), cfg("p=2,slots=2,mem=1024m,cpu=0.5,ckpt=5"));
    assert_eq!(job, before.as_str(), "in place keeps the job");
    f.add(
        "in-place rescale downtime",
        rig.up.longest_down(t, now_ms()),
    );

    // 3. Full restart; the daemon dies right after the savepoint, with the job stopped.
    let crash = cfg("p=2,slots=1,mem=1100m,cpu=1,ckpt=7");
    let t = now_ms();
    let cli = rig
        .apply_until(
            &[
                "--slots",
                "1",
                "--tm-memory",
                "1100m",
                "--tm-cpu",
                "1",
                "--checkpoint-interval",
                "7s",
            ],
            "→ stop",
        )
        .await;
    assert!(
        rig.daemon_killed_itself().await,
        "the failpoint did not fire"
    );
    let killed_at = now_ms();
    rig.start_daemon(None).await;
    let done = rig
        .wait_for("resumed restart", |d| {
            d.operations.last().is_some_and(|op| op.finished)
        })
        .await;
    let op = done.operations.last().unwrap();
    assert_eq!(op.strategy, "Restart");
    assert!(
        op.log
            .iter()
            .any(|(_, l)| l.contains("resumed at taskmanagers")),
        "{:#?}",
        op.log
    );
    let (config, job) = applied(op);
    assert_eq!(cfg(&config), crash);
    let job = JobId::from(job.as_str());
    assert_eq!(
        rig.restored_from(&job).await,
        op.savepoint,
        "from our savepoint"
    );
    let interval = rig.client.checkpoint_config(&job).await.unwrap().interval;
    assert_eq!(interval as u64, 7000);
    rig.assert_agent_runs(&crash).await;
    let out = tokio::time::timeout(Duration::from_secs(60), cli.wait_with_output())
        .await
        .expect("the CLI never noticed the daemon died")
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("goes on in the daemon"),
        "{err}"
    );
    f.add(
        "full restart with the daemon SIGKILLed: downtime",
        rig.up.longest_down(t, now_ms()),
    );
    f.add(
        "  daemon killed → restarted daemon finished the restart",
        now_ms() - killed_at,
    );
    f.add(
        "    of which TaskManagers by the agent (resumed step)",
        step_ms(op, "taskmanagers") + step_ms(op, "wait-taskmanagers"),
    );
    f.add(
        "    of which restore (submit → RUNNING, records)",
        step_ms(op, "submit") + step_ms(op, "wait-running"),
    );
    let log = rig.daemon.as_ref().unwrap().log_text();
    let waited = demeter_tests::process::log_field(&log, "agents connected", "waited_ms");
    f.add(
        "  restarted daemon waited for the agent to reconnect",
        waited.unwrap(),
    );
    assert_one_running_and_every_stop_saved(&rig.client, "after the crash", &cancelled).await;

    // 4. Full restart back; a second apply meanwhile is refused.
    let back = cfg("p=2,slots=2,mem=1024m,cpu=0.5,ckpt=5");
    let t = now_ms();
    let running = rig
        .apply_until(
            &[
                "--slots",
                "2",
                "--tm-memory",
                "1024m",
                "--tm-cpu",
                "0.5",
                "--checkpoint-interval",
                "5s",
            ],
            "→ stop",
        )
        .await;
    let second = rig
        .cli()
        .args(["apply", "--name", JOB, "--parallelism", "1"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        !second.status.success() && err.contains("is busy: an apply is in flight"),
        "{err}"
    );
    let out = running.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let op = rig.last_op().await;
    let (config, job) = applied(&op);
    assert_eq!(cfg(&config), back);
    let job = JobId::from(job.as_str());
    assert_eq!(rig.restored_from(&job).await, op.savepoint);
    rig.assert_agent_runs(&back).await;
    f.add(
        "full restart: savepoint (stop-with-savepoint)",
        step_ms(&op, "stop"),
    );
    f.add(
        "full restart: TaskManagers by the agent",
        step_ms(&op, "taskmanagers") + step_ms(&op, "wait-taskmanagers"),
    );
    f.add(
        "full restart: restore (submit → RUNNING, records)",
        step_ms(&op, "submit") + step_ms(&op, "wait-running"),
    );
    f.add("full restart: downtime", rig.up.longest_down(t, now_ms()));

    // 5. The watchdog: cancelled behind Demeter's back, back from its newest checkpoint.
    let (_, victim) = rig.current().await;
    rig.client.cancel_job(&victim).await.unwrap();
    cancelled.push(victim.clone());
    let t = now_ms();
    let details = rig
        .wait_for("watchdog recovery", |d| {
            d.job
                .current
                .as_ref()
                .is_some_and(|c| c.flink_job != victim.as_str())
                && d.job.flink_state.as_deref() == Some("RUNNING")
        })
        .await;
    let op = details.operations.last().unwrap();
    assert_eq!(op.strategy, "Recover");
    let Some(OutcomeSummary::RolledBack {
        config,
        flink_job,
        reason,
    }) = &op.outcome
    else {
        panic!("{:#?}", op.log)
    };
    assert!(reason.starts_with("watchdog: job was CANCELED"), "{reason}");
    assert_eq!(cfg(config), back);
    let restored = rig
        .restored_from(&JobId::from(flink_job.as_str()))
        .await
        .unwrap();
    assert!(restored.contains("chk-"), "from a checkpoint: {restored}");
    rig.assert_agent_runs(&back).await;
    f.add(
        "watchdog: cancelled job → running again (5 s grace)",
        rig.up.longest_down(t, now_ms()),
    );
    assert_one_running_and_every_stop_saved(&rig.client, "after the watchdog", &cancelled).await;

    // The daemon goes (its watchdog would restart what we stop next), then the final check.
    let (_, job) = rig.current().await;
    let log = rig.daemon.as_ref().unwrap().log_text();
    assert!(
        log.contains("ALERT: restarting a stopped job"),
        "the watchdog said nothing"
    );
    // The lab cluster bounds web.timeout and the metric fetcher; the daemon read its
    // configuration and agreed.
    assert!(
        log.contains("Flink configuration checked: nothing to change"),
        "the daemon did not check Flink's configuration"
    );
    assert!(
        rig.daemon
            .as_mut()
            .unwrap()
            .terminate(Duration::from_secs(20))
            .success()
    );
    let records = stop_and_check_exactly_once(&rig.client, &job, &rig.repo, &rig.out).await;
    println!("exactly-once: {records} records, none lost or duplicated");
    assert!(rig.agent.terminate(Duration::from_secs(60)).success());
    f.add("whole test", now_ms() - t0);
    f.print();
}

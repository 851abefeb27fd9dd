//! TaskManager orders over the real QUIC path: an in-process coordinator (`Ingest`) orders the
//! real `demeter-agent` binary, configured with the child supervisor and a stand-in
//! `bin/taskmanager.sh` (no Flink needed; `agent/tests/supervisor_flink.rs` covers real Flink).
//! A Start resent with the same id while the first copy runs starts one process; Kill reports
//! Failed; the agent's SIGTERM stops the TaskManagers it runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use demeter_common::protocol::{
    Order, OrderKind, OrderOutcome, Role, TaskManagerSpec, TaskManagerState, TaskManagerStatus,
};
use demeter_coordinator::ingest::IngestHandle;
use demeter_tests::process::{start_agent_with, start_ingest};
use demeter_tests::{Pki, Scratch};

const AGENT: &str = "tm-node";

fn spec(id: &str) -> TaskManagerSpec {
    TaskManagerSpec {
        id: id.into(),
        cluster: "fake".into(),
        process_memory_mb: 1024,
        slots: 2,
        cpu_millis: 500,
        properties: vec![],
    }
}

async fn order(handle: &IngestHandle, kind: OrderKind) -> Vec<TaskManagerStatus> {
    let result = handle
        .send_order(AGENT, kind, Duration::from_secs(60))
        .await
        .unwrap();
    match result.outcome {
        OrderOutcome::TaskManagers(list) => list,
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn find<'a>(list: &'a [TaskManagerStatus], id: &str) -> &'a TaskManagerStatus {
    list.iter().find(|s| s.spec.id == id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taskmanager_orders_over_quic() {
    let scratch = Scratch::new("tm-orders");
    let pki = Pki::new(&scratch.path.join("pki"));
    pki.issue(AGENT, Role::Agent);
    let home = scratch.path.join("flink");
    std::fs::create_dir_all(home.join("bin")).unwrap();
    let script = home.join("bin/taskmanager.sh");
    // Counts its starts, then becomes a long sleep (as the real script becomes java).
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"$*\" >> \"$FLINK_LOG_DIR/starts\"\nexec sleep 1000\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

    let ingest = start_ingest(&scratch.path, &pki);
    let port = ingest.local_addr().unwrap().port();
    let supervisor = format!(
        "[supervisor]\nbackend = \"child\"\nstop_grace_ms = 2000\n[supervisor.clusters.fake]\nflink_home = \"{0}\"\nconf_dir = \"{0}\"\nlog_dir = \"{0}\"\n",
        home.display()
    );
    let mut agent = start_agent_with(&scratch.path, &pki, AGENT, port, 1000, &supervisor);
    let handle = ingest.handle();
    let t0 = Instant::now();
    while !handle.connected_agents().iter().any(|a| a == AGENT) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "agent never connected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The same Start twice at once, same id: one process, the same answer to both.
    let start = Order {
        id: 77,
        deadline_ms: u64::MAX,
        kind: OrderKind::StartTaskManager(spec("tm-a")),
    };
    let (first, second) = tokio::join!(
        handle.resend_order(AGENT, start.clone(), Duration::from_secs(60)),
        handle.resend_order(AGENT, start.clone(), Duration::from_secs(60)),
    );
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(first, second);
    let OrderOutcome::TaskManagers(list) = first.outcome else {
        panic!("{first:?}")
    };
    let a = find(&list, "tm-a");
    assert_eq!(a.state, TaskManagerState::Running);
    let pid_a = a.pid.unwrap();
    // "Running" means spawned; the script writes its line a moment later.
    let t0 = Instant::now();
    while !home.join("starts").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the script never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let starts = std::fs::read_to_string(home.join("starts")).unwrap();
    assert_eq!(starts.lines().count(), 1, "{starts}");
    assert!(
        starts.contains("-D taskmanager.resource-id=tm-a"),
        "{starts}"
    );
    // Resent after completion: replayed, still one process.
    let again = handle
        .resend_order(AGENT, start, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(again, second);
    assert_eq!(
        std::fs::read_to_string(home.join("starts"))
            .unwrap()
            .lines()
            .count(),
        1
    );

    let list = order(&handle, OrderKind::KillTaskManager { id: "tm-a".into() }).await;
    assert!(
        matches!(&find(&list, "tm-a").state, TaskManagerState::Failed(r) if r.contains("SIGKILL")),
        "{list:?}"
    );
    assert!(!std::path::Path::new(&format!("/proc/{pid_a}")).exists());

    let list = order(&handle, OrderKind::StartTaskManager(spec("tm-b"))).await;
    let pid_b = find(&list, "tm-b").pid.unwrap();
    let list = order(&handle, OrderKind::ListTaskManagers).await;
    assert_eq!(list.len(), 2);
    let unknown = handle
        .send_order(
            AGENT,
            OrderKind::StopTaskManager { id: "nope".into() },
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert!(
        matches!(unknown.outcome, OrderOutcome::Failed(_)),
        "{unknown:?}"
    );

    // The agent's shutdown stops its child TaskManagers.
    let status = agent.terminate(Duration::from_secs(20));
    assert!(status.success(), "agent exit {status:?}");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid_b}")).exists(),
        "tm-b outlived the agent"
    );
    ingest.shutdown().await;
}

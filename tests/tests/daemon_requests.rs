//! CLI job requests to the real coordinator daemon over QUIC, without Flink: what is refused,
//! and how clearly. Registration and listing work; an apply without the configured agent is
//! refused before anything is touched; bad input is refused by the CLI before sending and by
//! the daemon on receipt (a peer that skips the CLI's checks); an agent certificate may not
//! ask. `daemon_flink.rs` drives real operations.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use demeter_common::protocol::jobs::{JobRegistration, JobSummary};
use demeter_common::protocol::{
    AgentMessage, Capability, CoordinatorMessage, Hello, JobReply, JobRequest, Role,
};
use demeter_common::transport;
use demeter_tests::process::{job_cli, start_coordinator_with};
use demeter_tests::{Pki, Scratch, free_udp_port, loopback, peers};

fn run(command: &mut std::process::Command) -> (bool, String, String) {
    let out = command.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Sends one request as a raw CLI peer (no client-side checks) and returns the answer.
async fn raw_request(pki: &Pki, addr: SocketAddr, request: JobRequest) -> JobReply {
    let endpoint = peers::endpoint_for(&pki.identity("operator"));
    let connection = endpoint
        .connect(addr, "coordinator")
        .unwrap()
        .await
        .unwrap();
    let (mut send, mut recv) = connection.open_bi().await.unwrap();
    transport::write_preamble(&mut send).await.unwrap();
    let hello = Hello {
        boot_id: 0,
        software: "raw".into(),
        capabilities: vec![Capability::Jobs],
    };
    transport::write_frame(&mut send, &AgentMessage::Hello(hello))
        .await
        .unwrap();
    transport::read_preamble(&mut recv).await.unwrap();
    transport::write_frame(&mut send, &AgentMessage::Job(request))
        .await
        .unwrap();
    match transport::expect_frame::<CoordinatorMessage>(&mut recv)
        .await
        .unwrap()
    {
        CoordinatorMessage::Job(reply) => reply,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn job_requests_are_checked_and_refused_clearly() {
    let scratch = Scratch::new("daemon-requests");
    let pki = Pki::new(&scratch.path.join("pki"));
    pki.issue("operator", Role::Cli);
    pki.issue("node-1", Role::Agent);
    let port = free_udp_port();
    // Flink is not needed for these: the REST URL points nowhere.
    let executor = "[flink]\nrest_url = \"http://127.0.0.1:9\"\n\
                    [executor]\ncluster = \"lab\"\nagents = [\"node-1\"]\nresume_wait_secs = 1\n\
                    [executor.watchdog]\ngrace_secs = 1\ninterval_secs = 1\n";
    let mut coordinator = start_coordinator_with(&scratch.path, &pki, port, executor, &[]);
    let cli = || job_cli(&pki, "operator", port);
    let jar = scratch.path.join("coordinator.toml");

    let (ok, _, err) = run(cli().args([
        "register",
        "--name",
        "bench",
        "--jar",
        "/nonexistent/bench.jar",
        "--entry-class",
        "io.Bench",
    ]));
    assert!(
        !ok && err.contains("no jar /nonexistent/bench.jar"),
        "{err}"
    );

    let (ok, out, err) = run(cli()
        .args(["register", "--name", "bench", "--entry-class", "io.Bench"])
        .arg("--jar")
        .arg(&jar)
        .args(["--args", "--rate", "10"]));
    assert!(ok, "{err}");
    assert!(out.contains("registered bench (not running)"), "{out}");

    let (ok, out, err) = run(cli().args(["list", "--json"]));
    assert!(ok, "{err}");
    let jobs: Vec<JobSummary> = serde_json::from_str(&out).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].args, ["--rate", "10"]);
    assert_eq!(jobs[0].current, None);

    // The configured agent is not connected: refused before the job is touched.
    let first = [
        "apply",
        "--name",
        "bench",
        "--parallelism",
        "1",
        "--slots",
        "1",
        "--tm-memory",
        "1g",
        "--tm-cpu",
        "1",
        "--checkpoint-interval",
        "5s",
    ];
    let (ok, _, err) = run(cli().args(first));
    assert!(!ok && err.contains("agents not connected: node-1"), "{err}");
    let (ok, _, err) = run(cli().args(["apply", "--name", "bench", "--parallelism", "2"]));
    assert!(
        !ok && err.contains("slots is needed: the job does not run yet"),
        "{err}"
    );

    // Refused by the CLI itself, before anything is sent.
    let (ok, _, err) = run(cli().args(["apply", "--name", "bench"]));
    assert!(!ok && err.contains("nothing to apply"), "{err}");
    let (ok, _, err) = run(cli()
        .args(["register", "--name", "no/slash", "--entry-class", "io.B"])
        .arg("--jar")
        .arg(&jar));
    assert!(!ok && err.contains("job name"), "{err}");
    let (ok, _, err) = run(cli().arg("resume"));
    assert!(
        !ok && err.contains("resumes operations left in flight by itself"),
        "{err}"
    );

    let (ok, _, err) = run(cli().args(["show", "nope"]));
    assert!(
        !ok && err.contains("refused: no registered job nope"),
        "{err}"
    );

    // An agent's certificate may not make CLI requests.
    let (ok, _, err) = run(job_cli(&pki, "node-1", port).arg("list"));
    assert!(!ok, "an agent certificate was served");
    assert!(err.contains("may not make CLI requests"), "{err}");

    // A peer that skips the CLI's checks is refused by the daemon, with the reason.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = loopback(port);
    let oversized = JobRegistration {
        name: "big".into(),
        jar: jar.to_string_lossy().into_owned(),
        entry_class: "io.Bench".into(),
        args: vec!["x".into(); 300],
        qos_latency_ms: None,
        qos_recovery_s: None,
        space_toml: None,
        savepoint_dir: None,
    };
    let reply = rt.block_on(raw_request(&pki, addr, JobRequest::Register(oversized)));
    assert!(
        matches!(&reply, JobReply::Refused(r) if r.contains("300 program arguments")),
        "{reply:?}"
    );
    let reply = rt.block_on(raw_request(
        &pki,
        addr,
        JobRequest::Show {
            job: "bench".into(),
            operations: 1000,
        },
    ));
    assert!(
        matches!(&reply, JobReply::Refused(r) if r.contains("at most")),
        "{reply:?}"
    );

    // The watchdog leaves a job that was never deployed alone; the daemon is unharmed.
    std::thread::sleep(Duration::from_secs(2));
    let (ok, out, _) = run(cli().args(["show", "bench"]));
    assert!(ok && out.contains("not running"), "{out}");
    assert!(!coordinator.log_text().contains("ALERT"));
    assert!(coordinator.terminate(Duration::from_secs(10)).success());
}

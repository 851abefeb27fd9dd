//! Coordinator + 3 agents on loopback; the coordinator is SIGKILLed and restarted; every sample
//! taken during the outage arrives exactly once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use demeter_common::protocol::Role;
use demeter_coordinator::store::Store;
use demeter_tests::process::{log_field, start_agent, start_coordinator};
use demeter_tests::{Pki, Scratch, free_udp_port, loopback, peers};

const AGENTS: [&str; 3] = ["node-a", "node-b", "node-c"];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn samples_taken_while_the_coordinator_is_down_arrive_exactly_once() {
    let scratch = Scratch::new("outage");
    let pki = Pki::new(&scratch.path.join("pki"));
    pki.issue("cli", Role::Cli);
    for name in AGENTS {
        pki.issue(name, Role::Agent);
    }
    let port = free_udp_port();
    let addr = loopback(port);
    let mut coordinator = start_coordinator(&scratch.path, &pki, port);
    let mut agents: Vec<_> = AGENTS
        .iter()
        .map(|n| start_agent(&scratch.path, &pki, n, port, 100))
        .collect();

    wait_until(
        "all agents storing samples",
        Duration::from_secs(30),
        || {
            let fleet = peers::fleet(&pki, addr);
            AGENTS
                .iter()
                .all(|n| fleet.iter().any(|a| a.name == *n && a.stored_up_to >= 10))
        },
    );

    coordinator.kill9();
    let outage_start = now_ms();
    std::thread::sleep(Duration::from_secs(3));
    let outage_end = now_ms();
    let mut coordinator = start_coordinator(&scratch.path, &pki, port);

    // Every agent reconnects and resumes from what the store already held.
    for agent in &agents {
        coordinator.wait_for_log(&format!("name={}", agent.name), 2, Duration::from_secs(30));
    }
    let resumed = coordinator.log_text();
    let second_run = &resumed[resumed.rfind("coordinator listening").unwrap()..];
    for name in AGENTS {
        let line = second_run
            .lines()
            .find(|l| l.contains(&format!("name={name}")) && l.contains("agent connected"))
            .unwrap();
        let stored: u64 = log_field(line, "agent connected", "stored_up_to").unwrap();
        assert!(
            stored >= 10,
            "{name} resumed from {stored}: the store lost what it had acknowledged"
        );
    }
    std::thread::sleep(Duration::from_secs(1));

    let mut taken = Vec::new();
    for agent in &mut agents {
        assert!(agent.terminate(Duration::from_secs(15)).success());
        let log = agent.log_text();
        assert_eq!(log_field(&log, "agent stopped", "samples_dropped"), Some(0));
        assert_eq!(
            log_field(&log, "agent stopped", "samples_unsent"),
            Some(0),
            "{log}"
        );
        taken.push(log_field(&log, "agent stopped", "samples_taken").unwrap());
    }
    assert!(coordinator.terminate(Duration::from_secs(15)).success());

    let store = Store::open(&scratch.path.join("store.redb")).unwrap();
    for (name, taken) in AGENTS.iter().zip(taken) {
        let samples = store.samples_of(name).unwrap();
        let seqs: Vec<u64> = samples.iter().map(|(_, seq, _)| *seq).collect();
        let expected: Vec<u64> = (1..=taken).collect();
        assert_eq!(
            seqs, expected,
            "{name}: stored sequence numbers must be exactly 1..={taken}"
        );
        let boots: std::collections::BTreeSet<u64> = samples.iter().map(|(b, _, _)| *b).collect();
        assert_eq!(boots.len(), 1);
        let during_outage = samples
            .iter()
            .filter(|(_, _, s)| (outage_start..outage_end).contains(&s.taken_at_ms))
            .count();
        // 3 s at 10 Hz: about 30 samples were taken while nobody could receive them.
        assert!(
            during_outage >= 20,
            "{name}: only {during_outage} samples from the outage stored"
        );
    }
    let log = coordinator.log_text();
    assert!(!log.contains("group commit failed"), "{log}");
}

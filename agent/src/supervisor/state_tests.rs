#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn spec(id: &str, mb: u32) -> TaskManagerSpec {
    TaskManagerSpec {
        id: id.to_string(),
        cluster: "lab".to_string(),
        process_memory_mb: mb,
        slots: 1,
        cpu_millis: 1000,
        properties: vec![],
    }
}

fn state(t: &Table, id: &str) -> TaskManagerState {
    t.status(id)
        .map(|s| s.state)
        .unwrap_or(TaskManagerState::Stopped)
}

#[test]
fn start_spawns_once_and_same_spec_is_a_no_op() {
    let mut t = Table::new(1000);
    assert_eq!(
        t.request_start(spec("a", 640), 0),
        vec![Action::Spawn(spec("a", 640))]
    );
    assert_eq!(state(&t, "a"), TaskManagerState::Starting);
    assert!(
        t.request_start(spec("a", 640), 1).is_empty(),
        "while starting"
    );
    assert!(t.spawned("a", Some(42), 5).is_empty());
    let s = t.status("a").unwrap();
    assert_eq!(
        (s.state, s.pid, s.started_at_ms),
        (TaskManagerState::Running, Some(42), Some(5))
    );
    assert!(
        t.request_start(spec("a", 640), 6).is_empty(),
        "while running"
    );
}

#[test]
fn another_spec_restarts_after_the_old_process_ends() {
    let mut t = Table::new(1000);
    t.request_start(spec("a", 640), 0);
    t.spawned("a", Some(42), 1);
    assert_eq!(
        t.request_start(spec("a", 1024), 10),
        vec![Action::Terminate { id: "a".into() }]
    );
    assert_eq!(state(&t, "a"), TaskManagerState::Stopping);
    assert_eq!(
        t.exited("a", Some(42), Exit::Code(143)),
        vec![Action::Spawn(spec("a", 1024))]
    );
    assert_eq!(state(&t, "a"), TaskManagerState::Starting);
    t.spawned("a", Some(43), 20);
    let s = t.status("a").unwrap();
    assert_eq!(s.spec.process_memory_mb, 1024);
    assert_eq!(s.pid, Some(43));
    // A late exit report of the old process changes nothing.
    assert!(t.exited("a", Some(42), Exit::Signal(9)).is_empty());
    assert_eq!(state(&t, "a"), TaskManagerState::Running);
}

#[test]
fn stop_escalates_to_kill_after_the_grace_period() {
    let mut t = Table::new(1000);
    t.request_start(spec("a", 640), 0);
    t.spawned("a", Some(42), 1);
    assert_eq!(
        t.request_stop("a", 100).unwrap(),
        vec![Action::Terminate { id: "a".into() }]
    );
    assert!(t.tick(1099).is_empty());
    assert_eq!(t.tick(1100), vec![Action::Kill { id: "a".into() }]);
    assert!(t.tick(5000).is_empty(), "escalates once");
    t.exited("a", Some(42), Exit::Signal(9));
    assert_eq!(state(&t, "a"), TaskManagerState::Stopped);
    assert!(!t.any_live());
    assert!(t.request_stop("a", 6000).unwrap().is_empty());
}

#[test]
fn kill_order_reports_failed_and_unexpected_exit_is_failed() {
    let mut t = Table::new(1000);
    t.request_start(spec("a", 640), 0);
    t.spawned("a", Some(42), 1);
    assert_eq!(
        t.request_kill("a").unwrap(),
        vec![Action::Kill { id: "a".into() }]
    );
    t.exited("a", Some(42), Exit::Signal(9));
    assert_eq!(
        state(&t, "a"),
        TaskManagerState::Failed("killed by signal 9 (SIGKILL) on the coordinator's order".into())
    );
    t.request_start(spec("b", 640), 2);
    t.spawned("b", Some(50), 3);
    t.exited("b", Some(50), Exit::Code(1));
    assert_eq!(
        state(&t, "b"),
        TaskManagerState::Failed("exited with status 1".into())
    );
    // A failed TaskManager starts again on request, with a clean record.
    assert_eq!(
        t.request_start(spec("a", 640), 10),
        vec![Action::Spawn(spec("a", 640))]
    );
    t.spawned("a", Some(60), 11);
    t.exited("a", Some(60), Exit::Code(2));
    assert_eq!(
        state(&t, "a"),
        TaskManagerState::Failed("exited with status 2".into())
    );
}

#[test]
fn stop_during_start_is_passed_on_once_spawned() {
    let mut t = Table::new(1000);
    t.request_start(spec("a", 640), 0);
    t.request_stop("a", 1).unwrap();
    assert_eq!(
        t.spawned("a", Some(42), 2),
        vec![Action::Terminate { id: "a".into() }]
    );
    t.exited("a", Some(42), Exit::Code(143));
    assert_eq!(state(&t, "a"), TaskManagerState::Stopped);
}

#[test]
fn unknown_ids_are_refused_and_spawn_failures_reported() {
    let mut t = Table::new(1000);
    assert_eq!(t.request_stop("x", 0), Err(Refusal::Unknown("x".into())));
    assert_eq!(t.request_kill("x"), Err(Refusal::Unknown("x".into())));
    t.request_start(spec("a", 640), 0);
    t.spawn_failed("a", "no such cluster");
    assert_eq!(
        state(&t, "a"),
        TaskManagerState::Failed("could not start: no such cluster".into())
    );
    assert!(!t.any_live());
}

#[test]
fn stop_all_stops_only_live_ones_and_lists_are_sorted() {
    let mut t = Table::new(1000);
    for (id, pid) in [("b", 2), ("a", 1)] {
        t.request_start(spec(id, 640), 0);
        t.spawned(id, Some(pid), 0);
    }
    t.request_start(spec("c", 640), 0);
    t.spawned("c", Some(3), 0);
    t.request_stop("c", 0).unwrap();
    t.exited("c", Some(3), Exit::Code(143));
    assert_eq!(
        t.stop_all(5),
        vec![
            Action::Terminate { id: "a".into() },
            Action::Terminate { id: "b".into() }
        ]
    );
    let ids: Vec<_> = t.statuses().into_iter().map(|s| s.spec.id).collect();
    assert_eq!(ids, ["a", "b", "c"]);
}

#[test]
fn a_service_manager_restart_after_a_failure_shows_running() {
    let mut t = Table::new(1000);
    t.request_start(spec("a", 640), 0);
    t.spawned("a", Some(42), 1);
    t.request_kill("a").unwrap();
    t.exited("a", Some(42), Exit::UnitResult("signal".into()));
    t.respawned("a", 43, 5000);
    let s = t.status("a").unwrap();
    assert_eq!(
        (s.state, s.pid, s.started_at_ms),
        (TaskManagerState::Running, Some(43), Some(5000))
    );
    // A running one is not touched by a stray respawn report.
    t.respawned("a", 99, 6000);
    assert_eq!(t.status("a").unwrap().pid, Some(43));
}

#[test]
fn the_newest_spec_wins_while_stopping() {
    let mut t = Table::new(1000);
    t.request_start(spec("a", 640), 0);
    t.spawned("a", Some(42), 1);
    t.request_stop("a", 2).unwrap();
    assert!(t.request_start(spec("a", 2048), 3).is_empty());
    assert!(t.request_start(spec("a", 1024), 4).is_empty());
    assert_eq!(
        t.exited("a", Some(42), Exit::Code(143)),
        vec![Action::Spawn(spec("a", 1024))]
    );
}

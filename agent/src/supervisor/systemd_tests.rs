#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn spec(mb: u32, slots: u32, cpu_millis: u32) -> TaskManagerSpec {
    TaskManagerSpec {
        id: "tm-1".into(),
        cluster: "default".into(),
        process_memory_mb: mb,
        slots,
        cpu_millis,
        properties: vec![],
    }
}

#[test]
fn memory_max_follows_the_contract_examples() {
    assert_eq!(memory_max_mib(1536), 1690);
    assert_eq!(memory_max_mib(512), 576);
    assert_eq!(memory_max_mib(640), 704, "max(64, 64)");
    assert_eq!(memory_max_mib(641), 706, "ceil(64.1) = 65");
}

#[test]
fn set_property_argv_is_exact() {
    assert_eq!(
        set_property_args("flink-taskmanager@tm-1.service", &spec(1536, 2, 2000)),
        [
            "--no-ask-password",
            "set-property",
            "--runtime",
            "flink-taskmanager@tm-1.service",
            "CPUQuota=200%",
            "MemoryMax=1690M"
        ]
    );
    assert_eq!(cpu_quota(1505), "151%", "rounded up");
    assert_eq!(cpu_quota(0), "", "no limit");
}

#[test]
fn verbs_argv_is_exact() {
    let unit = "flink-taskmanager@tm-1.service";
    assert_eq!(
        verb_args("start", unit),
        ["--no-ask-password", "start", unit]
    );
    assert_eq!(verb_args("stop", unit), ["--no-ask-password", "stop", unit]);
    assert_eq!(
        verb_args("reset-failed", unit),
        ["--no-ask-password", "reset-failed", unit]
    );
    assert_eq!(
        verb_args("kill", unit),
        ["--no-ask-password", "kill", "--signal=SIGKILL", unit]
    );
    assert_eq!(
        verb_args("show", unit),
        [
            "--no-ask-password",
            "show",
            "-p",
            "ActiveState,SubState,MainPID,Result",
            unit
        ]
    );
}

#[test]
fn env_file_is_atomic_0644_with_two_keys() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        env_file(&spec(1536, 2, 0)),
        "TM_PROCESS_MEMORY=1536m\nTM_SLOTS=2\n"
    );
    let path = write_env_file(dir.path(), "tm-1", &env_file(&spec(1536, 2, 0))).unwrap();
    assert_eq!(path, dir.path().join("tm-1.env"));
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    assert!(!dir.path().join("tm-1.env.tmp").exists());
    write_env_file(dir.path(), "tm-1", &env_file(&spec(640, 1, 0))).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "TM_PROCESS_MEMORY=640m\nTM_SLOTS=1\n"
    );
}

#[test]
fn show_output_is_parsed() {
    let running =
        UnitState::parse("ActiveState=active\nSubState=running\nMainPID=4242\nResult=success\n");
    assert_eq!(running.running_pid(), Some(4242));
    assert!(!running.ended());
    let restarting = UnitState::parse(
        "ActiveState=activating\nSubState=auto-restart\nMainPID=0\nResult=signal\n",
    );
    assert!(restarting.ended());
    assert_eq!(
        (restarting.main_pid, restarting.result.as_str()),
        (None, "signal")
    );
    assert!(
        UnitState::parse("ActiveState=failed\nSubState=failed\nMainPID=0\nResult=exit-code")
            .ended()
    );
}

#[test]
fn instance_names_are_restricted() {
    assert!(check_instance("prof-17").is_ok());
    for bad in ["", "Tm", "a_b", "a.b", "a b", &"x".repeat(65)] {
        assert!(check_instance(bad).is_err(), "{bad}");
    }
}

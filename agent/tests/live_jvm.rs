//! Collectors against real JVMs this test starts (Java 17 must be installed): our hsperfdata
//! reading agrees with `jstat -gc`, and discovery finds a TaskManager by its main class.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests may panic on bad data.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use demeter_agent::collectors::discovery::TASK_MANAGER_MAIN_CLASS;
use demeter_agent::collectors::gc::GcCounters;
use demeter_agent::collectors::hsperf::locate;
use demeter_agent::collectors::process::parse_status;
use demeter_agent::collectors::{Sampler, SamplerConfig};
use support::{compile, idle_program, mismatches, parse_jstat, start_java};

/// Finds the JVM's hsperfdata file the way the sampler does (through /proc/<pid>/root) and
/// reads it once it parses.
fn read_counters(pid: u32) -> GcCounters {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map(|s| parse_status(&s).unwrap())
            .unwrap();
        let counters = locate(Path::new("/proc"), Path::new("/tmp"), pid, Some(&status))
            .and_then(|path| std::fs::read(path).ok())
            .and_then(|bytes| GcCounters::parse(&bytes).ok());
        if let Some(c) = counters {
            return c;
        }
        assert!(Instant::now() < deadline, "no usable hsperfdata for {pid}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn jstat_gc(pid: u32) -> String {
    let out = Command::new("jstat")
        .args(["-gc", &pid.to_string()])
        // jstat formats numbers in the default locale.
        .env("LC_ALL", "C")
        .env("LANG", "C")
        .output()
        .expect("jstat must be installed for this test");
    assert!(out.status.success(), "jstat failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Compares column by column. The JVM is idle, but a background thread may still allocate or a
/// periodic GC run between the two reads, so a comparison only counts when our counters are the
/// same just before and just after jstat's read.
fn assert_matches_jstat(gc_flag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("Idle.java");
    std::fs::write(&source, idle_program(None, "Idle")).unwrap();
    let jvm = start_java(&["-Xmx64m", gc_flag, source.to_str().unwrap()]);
    let pid = jvm.pid();
    let mut last_wrong = Vec::new();
    for _attempt in 0..5 {
        let before = read_counters(pid);
        let jstat = jstat_gc(pid);
        let after = read_counters(pid);
        if before != after {
            continue;
        }
        last_wrong = mismatches(&parse_jstat(&jstat), &after);
        if last_wrong.is_empty() {
            assert!(
                after.young_gc_count + after.full_gc_count > 0,
                "the program collected"
            );
            return;
        }
    }
    panic!(
        "{gc_flag}: no agreement with jstat -gc in 5 attempts (empty = counters never still): \
         {last_wrong:#?}"
    );
}

#[test]
fn hsperfdata_matches_jstat_on_g1() {
    assert_matches_jstat("-XX:+UseG1GC");
}

#[test]
fn hsperfdata_matches_jstat_on_serial() {
    assert_matches_jstat("-XX:+UseSerialGC");
}

#[test]
fn sampler_finds_a_task_manager_jvm() {
    let dir = tempfile::tempdir().unwrap();
    let (package, class) = TASK_MANAGER_MAIN_CLASS.rsplit_once('.').unwrap();
    let classes = compile(
        dir.path(),
        TASK_MANAGER_MAIN_CLASS,
        &idle_program(Some(package), class),
    );
    let jvm = start_java(&[
        "-Xmx64m",
        "-cp",
        classes.to_str().unwrap(),
        TASK_MANAGER_MAIN_CLASS,
        "--configDir",
        "/nonexistent",
        "-D",
        "taskmanager.resource-id=live-test-tm",
    ]);
    let pid = jvm.pid();
    // Wait for the hsperfdata file, so discovery can locate it in the same pass.
    let expected = read_counters(pid);

    let mut sampler = Sampler::new(SamplerConfig::default()).unwrap();
    let first = sampler.sample(1_000);
    let ours = first
        .jvms
        .iter()
        .find(|j| j.pid == pid)
        .unwrap_or_else(|| panic!("pid {pid} not found in {:?}", first.jvms));
    assert_eq!(ours.taskmanager_id.as_deref(), Some("live-test-tm"));
    assert!(
        ours.rss_bytes > 10 << 20,
        "a JVM has more than 10 MiB resident"
    );
    let heap = ours.heap.as_ref().expect("heap read from hsperfdata");
    assert_eq!(heap.old_max_bytes, expected.old_max);
    assert_eq!(heap.young_gc_count, expected.young_gc_count);

    std::thread::sleep(Duration::from_millis(500));
    let second = sampler.sample(1_500);
    let again = second.jvms.iter().find(|j| j.pid == pid).unwrap();
    // The idle JVM's figure depends on its JIT and on the shared machine; only the bounds hold.
    let cores = again.cpu_cores;
    assert!(cores.is_finite() && (0.0..=second.host.cpu_count as f32 + 0.01).contains(&cores));

    drop(jvm);
    let gone = sampler.sample(2_000);
    assert!(gone.jvms.iter().all(|j| j.pid != pid), "exited JVM dropped");
}

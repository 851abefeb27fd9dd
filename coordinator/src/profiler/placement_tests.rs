#![allow(clippy::unwrap_used)]

use demeter_common::metrics::{HostSample, JvmSample};

use super::*;
use crate::profiler::plan::tests::one_plan;

const GIB: u64 = 1024 * 1024 * 1024;

fn sample(at_ms: u64, cores: u32, busy: f32, available_gib: f64, jvms: Vec<JvmSample>) -> Sample {
    Sample {
        taken_at_ms: at_ms,
        host: HostSample {
            cpu_count: cores,
            cpu_busy: busy,
            mem_available_bytes: (available_gib * GIB as f64) as u64,
            ..HostSample::default()
        },
        jvms,
    }
}

fn jvm(id: &str, cores: f32, rss_mib: u64) -> JvmSample {
    JvmSample {
        pid: 1,
        taskmanager_id: Some(id.into()),
        cpu_cores: cores,
        rss_bytes: rss_mib * 1024 * 1024,
        heap: None,
    }
}

fn tm(id: &str, cpu_millis: u32, memory_mb: u32) -> TaskManagerSpec {
    TaskManagerSpec {
        id: id.into(),
        cluster: "c".into(),
        process_memory_mb: memory_mb,
        slots: 1,
        cpu_millis,
        properties: vec![],
    }
}

fn res(cpu_cores: f64, memory_mb: f64) -> Resources {
    Resources {
        cpu_cores,
        memory_mb,
    }
}

fn booking(agent: &str, id: &str, cpu: f64, mb: f64) -> Booking {
    Booking {
        agent: agent.into(),
        taskmanager: id.into(),
        demand: res(cpu, mb),
    }
}

#[test]
fn spare_is_idle_and_available_less_the_reserve_and_what_booked_copies_will_still_take() {
    // 8 cores 25 % busy = 6 idle; 10 GiB available.
    let s = sample(0, 8, 0.25, 10.0, vec![jvm("prof-b1-c0-tm0", 0.5, 600)]);
    let reserve = res(1.0, 2048.0);
    assert_eq!(spare("a", &s, reserve, &[]), res(5.0, 8192.0));
    // The running copy TM (booked 1 core / 1024 MiB, using 0.5 / 600) will take 0.5 / 424
    // more; a TM booked but not in the sample yet counts in full; other agents' don't count.
    let booked = [
        booking("a", "prof-b1-c0-tm0", 1.0, 1024.0),
        booking("a", "prof-b1-c1-tm0", 2.0, 2048.0),
        booking("b", "prof-b1-c2-tm0", 4.0, 4096.0),
    ];
    let got = spare("a", &s, reserve, &booked);
    assert!((got.cpu_cores - 2.5).abs() < 1e-9, "{got:?}");
    assert!(
        (got.memory_mb - (8192.0 - 424.0 - 2048.0)).abs() < 1e-6,
        "{got:?}"
    );
    // Never negative: a node under its reserve has nothing to spare.
    let full = sample(0, 2, 0.9, 1.0, vec![]);
    assert_eq!(spare("a", &full, reserve, &[]), res(0.0, 0.0));
}

#[test]
fn stale_and_unlisted_agents_are_not_offered() {
    let samples = vec![
        ("a".to_string(), sample(10_000, 4, 0.0, 8.0, vec![])),
        ("b".to_string(), sample(1_000, 4, 0.0, 8.0, vec![])),
        ("c".to_string(), sample(9_000, 4, 0.0, 8.0, vec![])),
    ];
    let reserve = res(0.0, 0.0);
    let fresh = spare_by_agent(&samples, &[], reserve, &[], 12_000, 5_000);
    assert_eq!(fresh.keys().collect::<Vec<_>>(), ["a", "c"]);
    let allowed = spare_by_agent(&samples, &["c".to_string()], reserve, &[], 12_000, 5_000);
    assert_eq!(allowed.keys().collect::<Vec<_>>(), ["c"]);
    assert_eq!(total(&fresh), res(8.0, 16384.0));
}

#[test]
fn taskmanagers_go_where_most_of_them_still_fit_and_spread_when_needed() {
    let spare: BTreeMap<String, Resources> = [
        ("a".to_string(), res(2.0, 4096.0)),
        ("b".to_string(), res(8.0, 3072.0)),
        ("c".to_string(), res(0.5, 16384.0)),
    ]
    .into();
    // 1 core / 1024 MiB: a fits 2, b fits 3 (memory-bound), c none (CPU) → b, then a tie of
    // two on a and b → a (first name), then b.
    let tms = [
        tm("t0", 1000, 1024),
        tm("t1", 1000, 1024),
        tm("t2", 1000, 1024),
    ];
    let placed = place(&spare, &tms, true).unwrap();
    assert_eq!(placed["t0"], "b");
    assert_eq!(placed["t1"], "a");
    assert_eq!(placed["t2"], "b");
    // A fourth and fifth still fit (a: 1 left, b: 1 left); a sixth does not.
    let six: Vec<_> = (0..6).map(|i| tm(&format!("t{i}"), 1000, 1024)).collect();
    assert_eq!(place(&spare, &six[..5], true).unwrap().len(), 5);
    let err = place(&spare, &six, true).unwrap_err();
    assert!(err.contains("t5 needs 1.00 cores / 1024 MiB"), "{err}");
    assert!(
        place(&BTreeMap::new(), &tms[..1], true)
            .unwrap_err()
            .contains("no agent")
    );
}

#[test]
fn a_node_under_its_reserve_where_copies_run_is_pressed_others_are_not() {
    let samples = vec![
        ("a".to_string(), sample(0, 4, 0.0, 1.0, vec![])),
        ("b".to_string(), sample(0, 4, 0.0, 1.0, vec![])),
        ("c".to_string(), sample(0, 4, 0.0, 8.0, vec![])),
    ];
    let booked = [
        booking("a", "x-tm0", 1.0, 1024.0),
        booking("c", "x-tm1", 1.0, 1024.0),
    ];
    // b is short too, but runs no copy: nothing to take back there.
    assert_eq!(pressed(&samples, 2048.0, &booked), vec!["a".to_string()]);
    assert!(pressed(&samples, 512.0, &booked).is_empty());
}

#[test]
fn usage_sums_the_copys_jvms_only() {
    let jvms = [
        jvm("prof-b1-c1-tm0", 0.5, 512),
        jvm("prof-b1-c1-tm1", 0.25, 256),
        jvm("prof-b1-c10-tm0", 3.0, 4096),
    ];
    let used = jvm_usage(jvms.iter(), |id| id.starts_with("prof-b1-c1-tm")).unwrap();
    assert_eq!(used, res(0.75, 768.0));
    assert_eq!(jvm_usage(jvms.iter(), |id| id.starts_with("prod-tm")), None);
}

#[test]
fn copy_taskmanagers_join_the_copys_jobmanager_with_the_copys_own_directories() {
    let mut layout = crate::profiler::plan::tests::layout();
    layout.jobmanager_address = "10.1.2.3".into();
    layout.root = "/var/prof".into();
    let plan = &one_plan(&layout, 7, "p=2,slots=1,mem=1g,cpu=1,ckpt=5s");
    let props: BTreeMap<String, String> = copy_properties(plan).into_iter().collect();
    assert_eq!(props["jobmanager.rpc.address"], "10.1.2.3");
    assert_eq!(props["jobmanager.rpc.port"], "16500");
    assert_eq!(props["io.tmp.dirs"], "/var/prof/prof-b7-c0/tmp");
    assert_eq!(
        props["execution.checkpointing.dir"],
        "file:///var/prof/prof-b7-c0/checkpoints"
    );
    // Every path is the copy's own.
    for (key, value) in &props {
        if value.contains('/') {
            assert!(value.contains("/var/prof/prof-b7-c0/"), "{key} = {value}");
        }
    }
    // The copy's properties come after the spec's own in the command line, so they win.
    let mut spec = plan.taskmanagers[0].clone();
    spec.properties.extend(copy_properties(plan));
    let dynamic = spec.dynamic_properties();
    let port = dynamic
        .iter()
        .rposition(|(k, _)| k == "jobmanager.rpc.port")
        .unwrap();
    assert_eq!(dynamic[port].1, "16500");
}

//! Collectors on recorded inputs: hsperfdata files with the `jstat -gc` output taken at the same
//! moment, a fake /proc tree, and damaged files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests may panic on bad data.

mod support;

use std::path::Path;

use demeter_agent::Error;
use demeter_agent::collectors::discovery::{TASK_MANAGER_MAIN_CLASS, discover, parse_cmdline};
use demeter_agent::collectors::gc::GcCounters;
use demeter_agent::collectors::hsperf::{PerfData, locate};
use demeter_agent::collectors::process::ProcStatus;
use demeter_agent::collectors::{Sampler, SamplerConfig};
use proptest::prelude::*;
use support::{fixture, mismatches, parse_jstat};

fn hsperf_fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture(&format!("hsperf/{name}.hsperfdata"))).unwrap()
}

#[test]
fn recorded_files_match_recorded_jstat() {
    for name in ["g1", "serial"] {
        let counters = GcCounters::parse(&hsperf_fixture(name)).unwrap();
        let jstat = std::fs::read_to_string(fixture(&format!("hsperf/{name}.jstat"))).unwrap();
        let wrong = mismatches(&parse_jstat(&jstat), &counters);
        assert!(wrong.is_empty(), "{name}: {wrong:#?}");
    }
}

#[test]
fn serial_gc_has_no_concurrent_collector() {
    let c = GcCounters::parse(&hsperf_fixture("serial")).unwrap();
    assert_eq!(c.concurrent_gc_count, None);
    let g1 = GcCounters::parse(&hsperf_fixture("g1")).unwrap();
    assert!(g1.concurrent_gc_count.is_some());
}

#[test]
fn heap_sample_sums_young_spaces() {
    let c = GcCounters::parse(&hsperf_fixture("serial")).unwrap();
    let h = c.heap_sample();
    assert_eq!(
        h.young_committed_bytes,
        c.eden_capacity + c.survivor0_capacity + c.survivor1_capacity
    );
    assert_eq!(h.old_used_bytes, c.old_used);
    assert!(h.young_max_bytes >= h.young_committed_bytes);
    assert!(h.old_max_bytes >= h.old_committed_bytes);
    // -Xmx64m: young and old maxima together are the heap maximum.
    assert_eq!(h.heap_max_bytes(), 64 << 20);
    assert!((h.gc_time_ms() - c.ticks_to_ms(c.total_gc_ticks())).abs() < 1e-9);
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let file = hsperf_fixture("g1");
    for len in 0..file.len() {
        match GcCounters::parse(&file[..len]) {
            Err(Error::Hsperf { .. } | Error::MissingCounter(_)) => {}
            other => panic!("truncated to {len} bytes: {other:?}"),
        }
    }
}

#[test]
fn corrupted_headers_are_errors() {
    let file = hsperf_fixture("g1");
    let entry_offset = PerfData::parse(&file).unwrap().prologue().entry_offset as usize;
    // Words whose corruption must be caught: magic, byte order/version/accessible, used,
    // entry_offset, num_entries, then the first entry's length, name offset and data offset.
    // (overflow and mod_time_stamp are informational; a bad type code or vector length makes
    // an entry undecoded, which the GC counters do not depend on for that first entry.)
    let first_entry = [0, 4, 16].map(|o| entry_offset + o);
    for word in [0, 4, 8, 24, 28].into_iter().chain(first_entry) {
        let mut bad = file.clone();
        bad[word..word + 4].copy_from_slice(&[0xff; 4]);
        assert!(
            GcCounters::parse(&bad).is_err(),
            "word at {word} corrupted yet parsed"
        );
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = GcCounters::parse(&bytes);
    }

    /// Random entries behind a valid prologue, so the entry decoder (not just the magic check)
    /// sees arbitrary bytes.
    #[test]
    fn random_entries_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        num_entries in any::<u32>(),
    ) {
        let mut file = hsperf_fixture("g1")[..32].to_vec();
        let used = (file.len() + body.len()) as u32;
        file[8..12].copy_from_slice(&used.to_le_bytes());
        file[28..32].copy_from_slice(&num_entries.to_le_bytes());
        file.extend_from_slice(&body);
        let _ = GcCounters::parse(&file);
    }

    #[test]
    fn random_damage_to_a_real_file_never_panics(
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut file = hsperf_fixture("g1");
        for (at, byte) in damage {
            let i = at.index(file.len());
            file[i] = byte;
        }
        let len = cut.index(file.len() + 1);
        let _ = GcCounters::parse(&file[..len]);
    }
}

#[test]
fn cmdline_forms_of_the_resource_id() {
    let read = |pid: &str| std::fs::read(fixture(&format!("proc/{pid}/cmdline"))).unwrap();
    assert_eq!(
        parse_cmdline(&read("4242")).unwrap().resource_id.as_deref(),
        Some("tm-a")
    );
    assert_eq!(
        parse_cmdline(&read("5151")).unwrap().resource_id.as_deref(),
        Some("tm-b")
    );
    assert_eq!(parse_cmdline(&read("6000")), None, "shell wrapper");
    assert_eq!(parse_cmdline(&read("7000")), None, "JobManager");
    assert_eq!(parse_cmdline(b""), None, "kernel thread");
    let bare = b"java\0org.apache.flink.runtime.taskexecutor.TaskManagerRunner\0";
    assert_eq!(parse_cmdline(bare).unwrap().resource_id, None);
}

#[test]
fn discovery_on_a_fixture_tree() {
    let found = discover(&fixture("proc")).unwrap();
    let pids: Vec<u32> = found.iter().map(|j| j.pid).collect();
    assert_eq!(pids, [4242, 5151]);
    assert_eq!(
        found[0].status,
        Some(ProcStatus {
            euid: 1000,
            nspid: Some(17)
        })
    );
}

#[test]
fn hsperf_located_in_the_jvm_namespace_then_host_tmp() {
    let proc_root = fixture("proc");
    let host_tmp = fixture("tmp");
    let status = |nspid| ProcStatus {
        euid: 1000,
        nspid: Some(nspid),
    };
    let in_namespace = locate(&proc_root, &host_tmp, 4242, Some(&status(17))).unwrap();
    assert!(in_namespace.ends_with("4242/root/tmp/hsperfdata_flink/17"));
    let on_host = locate(&proc_root, &host_tmp, 5151, Some(&status(5151))).unwrap();
    assert!(on_host.ends_with("tmp/hsperfdata_flink/5151"));
    assert_eq!(locate(&proc_root, &host_tmp, 6000, None), None);
}

#[test]
fn sampler_over_a_fixture_tree() {
    let config = SamplerConfig {
        proc_root: fixture("proc"),
        host_tmp: fixture("tmp"),
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(config).unwrap();
    let sample = sampler.sample(1_000);
    assert_eq!(sample.taken_at_ms, 1_000);
    assert!(sample.host.cpu_count >= 1);
    assert_eq!(sample.jvms.len(), 2);
    let (a, b) = (&sample.jvms[0], &sample.jvms[1]);
    assert_eq!((a.pid, a.taskmanager_id.as_deref()), (4242, Some("tm-a")));
    assert_eq!((b.pid, b.taskmanager_id.as_deref()), (5151, Some("tm-b")));
    let page = demeter_agent::collectors::process::ProcUnits::of_this_host().page_size;
    assert_eq!(a.rss_bytes, 70_000 * page);
    assert_eq!(a.cpu_cores, 0.0, "no previous reading yet");
    let g1 = GcCounters::parse(&hsperf_fixture("g1")).unwrap();
    assert_eq!(a.heap, Some(g1.heap_sample()));
    let serial = GcCounters::parse(&hsperf_fixture("serial")).unwrap();
    assert_eq!(b.heap, Some(serial.heap_sample()));
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn sampler_follows_cpu_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("proc"), dir.path());
    let mut sampler = Sampler::new(SamplerConfig {
        proc_root: dir.path().to_owned(),
        host_tmp: fixture("tmp"),
        discovery_interval_ms: 60_000,
        ..SamplerConfig::default()
    })
    .unwrap();
    assert_eq!(sampler.sample(10_000).jvms.len(), 2);

    // 4242 burns 150 more ticks of utime in 2 s: 0.75 cores at 100 Hz.
    let stat_path = dir.path().join("4242/stat");
    let stat = std::fs::read_to_string(&stat_path).unwrap();
    std::fs::write(&stat_path, stat.replace(" 1234 567 ", " 1384 567 ")).unwrap();
    // 5151 exits.
    std::fs::remove_dir_all(dir.path().join("5151")).unwrap();

    let sample = sampler.sample(12_000);
    assert_eq!(sample.jvms.len(), 1, "the exited TaskManager is dropped");
    let ticks = demeter_agent::collectors::process::ProcUnits::of_this_host().ticks_per_second;
    let expected = 150.0 / ticks as f32 / 2.0;
    assert!((sample.jvms[0].cpu_cores - expected).abs() < 1e-4);
    assert_eq!(sampler.tracked_pids().collect::<Vec<_>>(), [4242]);

    // 4242 exits and its pid goes to a new TaskManager (a later start time): the old one is
    // dropped at once and the next tick rescans, well before the 60 s discovery interval.
    let stat = std::fs::read_to_string(&stat_path).unwrap();
    std::fs::write(&stat_path, stat.replace(" 88000 ", " 99999 ")).unwrap();
    let cmdline = format!("java\0{TASK_MANAGER_MAIN_CLASS}\0-Dtaskmanager.resource-id=tm-c\0");
    std::fs::write(dir.path().join("4242/cmdline"), cmdline).unwrap();
    assert!(sampler.sample(13_000).jvms.is_empty());
    let rescanned = sampler.sample(14_000);
    assert_eq!(rescanned.jvms.len(), 1);
    assert_eq!(rescanned.jvms[0].taskmanager_id.as_deref(), Some("tm-c"));
    assert_eq!(
        rescanned.jvms[0].cpu_cores, 0.0,
        "a new process has no previous reading"
    );
}

#![allow(clippy::unwrap_used)]

use super::*;

fn cfg(text: &str) -> JobConfig {
    text.parse().unwrap()
}

pub(crate) fn layout() -> Layout {
    Layout {
        rest_ports: PortRange {
            first: 18500,
            count: 20,
        },
        rpc_ports: PortRange {
            first: 16500,
            count: 20,
        },
        root: PathBuf::from("/var/lib/demeter/profiling"),
        jm_memory_mb: 768,
        jm_cpu_cores: 0.25,
        cap: Resources {
            cpu_cores: 4.0,
            memory_mb: 6144.0,
        },
        jobmanager_address: crate::profiler::plan::loopback(),
    }
}

/// The plan of a batch of one `config` that is admitted.
pub(crate) fn one_plan(layout: &Layout, batch: u64, config: &str) -> CopyPlan {
    let admissions = plan_batch(
        batch,
        &[cfg(config)],
        100.0,
        "--rate {rate}",
        layout,
        &Surroundings::default(),
    )
    .unwrap();
    match admissions.into_iter().next() {
        Some(Admission::Start(plan)) => *plan,
        other => panic!("not admitted: {other:?}"),
    }
}

fn started(a: &[Admission]) -> Vec<&CopyPlan> {
    a.iter()
        .filter_map(|a| match a {
            Admission::Start(p) => Some(p.as_ref()),
            Admission::Skipped { .. } => None,
        })
        .collect()
}

#[test]
fn template_is_substituted_with_the_rate_and_the_copys_own_paths() {
    let dir = Path::new("/p/prof-b1-c0");
    assert_eq!(
        substitute("--rate {rate} --sink discard", 3000.0, dir).unwrap(),
        ["--rate", "3000", "--sink", "discard"]
    );
    assert_eq!(
        substitute("--rate={rate} --output {output}", 12.5, dir).unwrap(),
        ["--rate=12.5", "--output", "file:///p/prof-b1-c0/output"]
    );
}

#[test]
fn template_naming_other_paths_or_unknown_placeholders_is_refused() {
    let dir = Path::new("/p/c");
    for bad in [
        "--rate {rate} --output file:///data/prod/out",
        "--state /var/lib/flink/prod",
        "--rate {speed}",
    ] {
        assert!(substitute(bad, 10.0, dir).is_err(), "{bad}");
    }
    assert!(substitute("--rate {rate}", f64::NAN, dir).is_err());
}

#[test]
fn copies_get_distinct_free_ports_and_their_own_directories() {
    let around = Surroundings {
        busy_ports: vec![18500, 16501],
        ..Surroundings::default()
    };
    let a = plan_batch(
        7,
        &[
            cfg("p=1,slots=1,mem=1024m,cpu=1,ckpt=5s"),
            cfg("p=2,slots=2,mem=1280m,cpu=1,ckpt=5s"),
        ],
        500.0,
        "--rate {rate} --sink discard",
        &layout(),
        &around,
    )
    .unwrap();
    let plans = started(&a);
    assert_eq!(plans.len(), 2);
    assert_eq!((plans[0].rest_port, plans[0].rpc_port), (18501, 16500));
    assert_eq!((plans[1].rest_port, plans[1].rpc_port), (18502, 16502));
    assert_eq!(plans[0].name, "prof-b7-c0");
    assert_eq!(
        plans[1].dir,
        Path::new("/var/lib/demeter/profiling/prof-b7-c1")
    );
    assert_eq!(plans[1].taskmanagers.len(), 1);
    assert_eq!(plans[1].taskmanagers[0].id, "prof-b7-c1-tm0");
    assert_eq!(plans[1].taskmanagers[0].slots, 2);
    assert_eq!(
        plans[0].flink_configuration["execution.checkpointing.interval"],
        "5 s"
    );
    for p in &plans {
        assert!(p.subdirs().iter().all(|d| d.starts_with(&p.dir)));
    }
}

#[test]
fn copies_that_do_not_fit_under_the_cap_are_skipped_not_started() {
    // 2 × (1 TM of 2048m + JM 768m) = 5632 MiB fits 6144; the third would not, the fourth is
    // small enough for what is left.
    let big = cfg("p=2,slots=2,mem=2048m,cpu=1,ckpt=10s");
    let small = cfg("p=1,slots=1,mem=640m,cpu=0.5,ckpt=10s");
    let a = plan_batch(
        1,
        &[big, big, big, small],
        100.0,
        "--rate {rate}",
        &layout(),
        &Surroundings::default(),
    )
    .unwrap();
    assert!(matches!(a[2], Admission::Skipped { .. }), "{a:?}");
    let plans = started(&a);
    assert_eq!(
        plans.len(),
        2,
        "the small one needs 1408 MiB, only 512 left"
    );
    let total: f64 = plans.iter().map(|p| p.demand.memory_mb).sum();
    assert!(total <= layout().cap.memory_mb);

    // What other batches hold and what the host has free count too.
    let around = Surroundings {
        profiling_in_use: Resources {
            cpu_cores: 3.0,
            memory_mb: 0.0,
        },
        ..Surroundings::default()
    };
    let a = plan_batch(2, &[big, small], 100.0, "--rate {rate}", &layout(), &around).unwrap();
    assert_eq!(started(&a).len(), 1);
    assert_eq!(started(&a)[0].config, small);
    let around = Surroundings {
        host_available: Some(Resources {
            cpu_cores: 8.0,
            memory_mb: 1000.0,
        }),
        ..Surroundings::default()
    };
    let a = plan_batch(3, &[big, small], 100.0, "--rate {rate}", &layout(), &around).unwrap();
    assert!(started(&a).is_empty(), "{a:?}");
    let Admission::Skipped { reason, .. } = &a[0] else {
        panic!()
    };
    assert!(reason.contains("needs"), "{reason}");
    // With the JobManagers elsewhere (agents run the TaskManagers), only the TaskManagers
    // count against the nodes' free resources: the small one's 640 MiB fit in 1000.
    let around = Surroundings {
        jobmanagers_elsewhere: true,
        ..around
    };
    let a = plan_batch(4, &[big, small], 100.0, "--rate {rate}", &layout(), &around).unwrap();
    assert_eq!(started(&a).len(), 1, "{a:?}");
    assert_eq!(started(&a)[0].config, small);
    assert!(
        started(&a)[0].demand.memory_mb > 1000.0,
        "the cap still sees the JobManager"
    );
}

#[test]
fn running_out_of_ports_skips() {
    let mut l = layout();
    l.rest_ports.count = 1;
    l.cap.memory_mb = 1e9;
    l.cap.cpu_cores = 1e9;
    let c = cfg("p=1,slots=1,mem=1024m,cpu=1,ckpt=5s");
    let a = plan_batch(
        1,
        &[c, c],
        1.0,
        "--rate {rate}",
        &l,
        &Surroundings::default(),
    )
    .unwrap();
    assert_eq!(started(&a).len(), 1);
    assert!(matches!(&a[1], Admission::Skipped { reason, .. } if reason.contains("port")));
}

#[test]
fn the_room_reported_to_the_policy_is_what_plan_batch_admits() {
    let host = Resources {
        cpu_cores: 8.0,
        memory_mb: 4000.0,
    };
    for (around, memory_mb) in [
        // The cap less the copy's JobManager (6144 − 768).
        (Surroundings::default(), 5376.0),
        // The host's free memory less the JobManager that runs on it.
        (
            Surroundings {
                host_available: Some(host),
                ..Surroundings::default()
            },
            3232.0,
        ),
        // Agents run the TaskManagers: only they count against the nodes.
        (
            Surroundings {
                host_available: Some(host),
                jobmanagers_elsewhere: true,
                ..Surroundings::default()
            },
            4000.0,
        ),
    ] {
        let room = taskmanager_room(&layout(), &around);
        assert_eq!(room.memory_mb, memory_mb, "{around:?}");
        assert_eq!(room.cpu_cores, 3.75, "{around:?}");
        let admitted = |mem: f64| {
            let config = cfg(&format!("p=1,slots=1,mem={mem}m,cpu=1,ckpt=10s"));
            let a = plan_batch(1, &[config], 100.0, "--rate {rate}", &layout(), &around).unwrap();
            started(&a).len() == 1
        };
        assert!(admitted(memory_mb), "{around:?}");
        assert!(!admitted(memory_mb + 64.0), "{around:?}");
    }
}

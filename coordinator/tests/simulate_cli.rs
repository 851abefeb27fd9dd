//! `demeter-coordinator simulate` end to end on a slice of a shipped trace: the binary runs every
//! available policy, prints the comparison, writes a timeline and a decision log that parse,
//! names the missing `demeter` policy clearly, and holds the policies to the twin's cluster when
//! asked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn simulate(extra: &[&str]) -> Output {
    simulate_twin(
        &repo().join("coordinator/testdata/twin-benchmark.toml"),
        extra,
    )
}

fn simulate_twin(twin: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_demeter-coordinator"))
        .arg("simulate")
        .arg("--trace")
        .arg(repo().join("data/traces/CARS_3D_1S_4_sub_35K_max.csv"))
        .arg("--twin")
        .arg(twin)
        .args(extra)
        .output()
        .expect("run demeter-coordinator")
}

#[test]
fn all_policies_on_a_trace_slice_with_timeline_and_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let timeline = dir.path().join("timeline.csv");
    let decisions = dir.path().join("decisions.jsonl");
    let out = simulate(&[
        "--policy",
        "all",
        "--skip",
        "3h",
        "--duration",
        "90m",
        "--failures-every",
        "30m",
        "--timeline",
        timeline.to_str().unwrap(),
        "--decisions",
        decisions.to_str().unwrap(),
        "--seed",
        "4",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for policy in ["static", "reactive", "demeter", "oracle"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(policy)),
            "no row for {policy}:\n{stdout}"
        );
    }
    let static_row = stdout.lines().find(|l| l.starts_with("static")).unwrap();
    assert!(static_row.contains("1.000  1.000  1.000"), "{static_row}");

    // 90 min at 10 s per row, four policies, one header.
    let text = std::fs::read_to_string(&timeline).unwrap();
    let mut lines = text.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("policy,t_s,rate,config,phase")
    );
    assert_eq!(lines.count(), 4 * 540);
    assert!(text.contains(",failed,"), "failures show in the timeline");

    let log = std::fs::read_to_string(&decisions).unwrap();
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failures = events
        .iter()
        .filter(|e| e["event"] == "failure" && e["policy"] == "static")
        .count();
    assert_eq!(failures, 2, "failures at 30 and 60 min");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "action" && e["policy"] == "oracle"),
        "the oracle acts on this slice"
    );
}

#[test]
fn json_summaries_demeter_and_unknown_policies() {
    let out = simulate(&["--policy", "oracle", "--duration", "3h", "--json"]);
    assert!(out.status.success());
    let summary: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(summary["policy"], "oracle");
    assert_eq!(summary["seconds"], 3 * 3600);
    assert!(summary["cost"].as_f64().unwrap() < 1.0);
    // The latency figure and its split by cause are in the JSON.
    assert_eq!(summary["seconds_over_latency"]["steady"], 0);
    assert!(summary["percent_over_latency"].as_f64().unwrap() <= 1.5);

    let out = simulate(&["--policy", "demeter", "--duration", "30m", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(summary["policy"], "demeter");
    assert_eq!(summary["seconds"], 1800);

    let out = simulate(&["--policy", "nonsense", "--duration", "10m"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown policy"));
}

#[test]
fn the_cluster_bound_holds_every_policy_to_the_twins_machines() {
    let dir = tempfile::tempdir().unwrap();
    let benchmark =
        std::fs::read_to_string(repo().join("coordinator/testdata/twin-benchmark.toml")).unwrap();
    let with_cluster = |cores: f64| {
        let path = dir.path().join(format!("twin-{cores}.toml"));
        let text = benchmark.replace("# cpu_cores = 30.0", &format!("cpu_cores = {cores}"));
        assert_ne!(
            text, benchmark,
            "the benchmark twin's [cluster] table changed"
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let run = |twin: &std::path::Path, extra: &[&str]| {
        simulate_twin(twin, &[&["--duration", "30m"], extra].concat())
    };
    // 20 cores cannot host the static default's 24: bounded (the default), the run is refused
    // and says why and what lifts the bound.
    let small = with_cluster(20.0);
    let refused = run(&small, &["--policy", "static"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("20 CPU cores"), "{stderr}");
    assert!(stderr.contains("--unbounded"), "{stderr}");
    assert!(
        run(&small, &["--policy", "static", "--unbounded"])
            .status
            .success()
    );

    // A static default of 12 one-core TaskManagers and the twin's default cluster (its 12 cores
    // plus 25 %: 15): at the CARS peak, reactive scales beyond the machines unless bounded.
    let most_cores = |bounded: bool| {
        let timeline = dir.path().join(format!("timeline-{bounded}.csv"));
        let mut extra = vec![
            "--policy",
            "all",
            "--static-config",
            "p=12,slots=1,mem=4g,cpu=1,ckpt=10s",
            "--skip",
            "4h",
            "--duration",
            "1h",
            "--timeline",
            timeline.to_str().unwrap(),
        ];
        if !bounded {
            extra.push("--unbounded");
        }
        let out = simulate(&extra);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&timeline).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let from_end = header.len() - header.iter().position(|h| *h == "cpu_alloc").unwrap();
        lines
            .map(|line| {
                // The quoted config column holds commas: count the fields from the end.
                let fields: Vec<&str> = line.split(',').collect();
                fields[fields.len() - from_end].parse::<f64>().unwrap()
            })
            .fold(0.0, f64::max)
    };
    assert!(
        most_cores(false) > 15.0,
        "unbounded, a policy outgrows the cluster"
    );
    assert!(most_cores(true) <= 15.0 + 1e-9, "bounded, none does");
}

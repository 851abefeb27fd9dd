//! A copy's Flink configuration directory, as `scripts/flink-lab.sh` writes it for a lab
//! cluster (the settings production-like clusters here run with), but with the copy's own
//! ports and directories. Pure text in, text out.

use super::plan::CopyPlan;

/// The `env.java.opts.all` value of the shipped `conf/config.yaml` (the `--add-opens` list Flink
/// needs on Java 17), read from nested YAML (`env:` → `java:` → `opts:` → `all: …`, possibly
/// continued on following `- ` lines) or the flat key. `None` when absent.
pub fn shipped_java_opts(config_yaml: &str) -> Option<String> {
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut collecting: Option<(usize, Vec<String>)> = None;
    for line in config_yaml.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if let Some((at, words)) = &mut collecting {
            if indent > *at && trimmed.starts_with('-') && !trimmed.starts_with("- ") {
                words.push(trimmed.to_string());
                continue;
            }
            if indent > *at
                && let Some(item) = trimmed.strip_prefix("- ")
            {
                words.push(item.trim().to_string());
                continue;
            }
            break;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        path.retain(|(i, _)| *i < indent);
        path.push((indent, key.trim().to_string()));
        let full: Vec<&str> = path.iter().map(|(_, k)| k.as_str()).collect();
        if full.join(".") == "env.java.opts.all" {
            let value = value.trim().trim_matches('"').to_string();
            collecting = Some((
                indent,
                if value.is_empty() {
                    vec![]
                } else {
                    vec![value]
                },
            ));
        }
    }
    collecting
        .map(|(_, words)| words.join(" "))
        .filter(|s| !s.is_empty())
}

/// Pekko's remoting start is bounded by its own `pekko.remote.classic.startup-timeout` (10 s),
/// which Flink's `pekko.startup-timeout` does not reach (Flink writes the pre-classic key
/// `pekko.remote.startup-timeout`): a TaskManager started on a loaded machine (seen in CI) timed
/// out there and exited. A JVM system property overrides Pekko's settings.
pub const PEKKO_STARTUP_OPT: &str = "-Dpekko.remote.classic.startup-timeout=60s";

/// `config.yaml` for a copy. Same runtime settings as the lab's clusters (adaptive scheduler,
/// 2 s / 10 s heartbeats, 1-s metric fetcher, managed fraction 0.1, hashmap state, fixed-delay
/// restarts), and every port and path the copy's own.
///
/// `web.timeout: 30 s` because the copy's TaskManager is killed on purpose: Flink's REST metric
/// fetcher starts no new fetch until the last one ends, and a fetch waits `web.timeout`
/// (default 10 min) on a TaskManager that stopped answering, so every metric would freeze.
///
/// [`PEKKO_STARTUP_OPT`] because copies start beside production on a node that may be loaded.
pub fn config_yaml(plan: &CopyPlan, java_opts: &str) -> String {
    let dir = plan.dir.display();
    let slots = plan.config.slots_per_tm;
    let tm_mem = plan.config.tm_memory_mb;
    format!(
        "# Written by demeter-coordinator for profiling copy {name} (batch {batch}); removed with it.
env.java.opts.all: \"{java_opts} {PEKKO_STARTUP_OPT}\"
env.log.dir: {dir}/log
env.pid.dir: {dir}/pid
io.tmp.dirs: {dir}/tmp
jobmanager.bind-host: {bind}
jobmanager.rpc.address: {address}
jobmanager.rpc.port: {rpc}
jobmanager.memory.process.size: {jm}m
jobmanager.execution.failover-strategy: region
jobmanager.scheduler: adaptive
taskmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.numberOfTaskSlots: {slots}
taskmanager.load-balance.mode: slots
taskmanager.memory.process.size: {tm_mem}m
taskmanager.memory.managed.fraction: 0.1
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: {rest}
blob.server.port: 0
state.backend.type: hashmap
execution.checkpointing.dir: file://{dir}/checkpoints
execution.checkpointing.savepoint-dir: file://{dir}/savepoints
execution.checkpointing.num-retained: 1
restart-strategy.type: fixed-delay
restart-strategy.fixed-delay.attempts: 1000
restart-strategy.fixed-delay.delay: 1 s
metrics.latency.interval: 0
metrics.fetcher.update-interval: 1000
web.timeout: 30 s
web.submit.enable: true
web.upload.dir: {dir}/upload
heartbeat.interval: 2 s
heartbeat.timeout: 10 s
",
        name = plan.name,
        batch = plan.batch,
        rpc = plan.rpc_port,
        rest = plan.rest_port,
        jm = plan.jm_memory_mb,
        address = plan.jobmanager_address,
        bind = bind_host(&plan.jobmanager_address),
    )
}

/// Loopback stays loopback-only; any other address is for agents on other nodes, so the
/// JobManager listens on every interface. REST stays on loopback: only this host reads it.
fn bind_host(address: &str) -> &'static str {
    let local = address == "localhost"
        || address
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if local { "127.0.0.1" } else { "0.0.0.0" }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::plan::{Admission, Layout, PortRange, Resources, Surroundings, plan_batch};
    use super::*;

    const SHIPPED: &str = "# comment
env:
  java:
    opts:
      all: --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED
jobmanager:
  bind-host: localhost
  rpc:
    port: 6123
";

    #[test]
    fn reads_the_shipped_java_options_nested_or_continued() {
        assert_eq!(
            shipped_java_opts(SHIPPED).unwrap(),
            "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED"
        );
        let continued = "env:\n  java:\n    opts:\n      all:\n        --add-opens=a\n        --add-opens=b\nother: 1\n";
        assert_eq!(
            shipped_java_opts(continued).unwrap(),
            "--add-opens=a --add-opens=b"
        );
        assert_eq!(
            shipped_java_opts("jobmanager:\n  rpc:\n    port: 1\n"),
            None
        );
    }

    #[test]
    fn every_port_and_path_is_the_copys_own() {
        let layout = Layout {
            rest_ports: PortRange {
                first: 18500,
                count: 2,
            },
            rpc_ports: PortRange {
                first: 16500,
                count: 2,
            },
            root: "/lab/profiling".into(),
            jm_memory_mb: 768,
            jm_cpu_cores: 0.25,
            cap: Resources {
                cpu_cores: 8.0,
                memory_mb: 8192.0,
            },
            jobmanager_address: crate::profiler::plan::loopback(),
        };
        let config = "p=2,slots=2,mem=1280m,cpu=1,ckpt=5s".parse().unwrap();
        let a = plan_batch(
            3,
            &[config],
            10.0,
            "--rate {rate}",
            &layout,
            &Surroundings::default(),
        )
        .unwrap();
        let Admission::Start(plan) = &a[0] else {
            panic!()
        };
        let yaml = config_yaml(plan, "--add-opens=x");
        assert!(yaml.contains("rest.port: 18500\n"));
        assert!(yaml.contains("jobmanager.rpc.port: 16500\n"));
        assert!(yaml.contains("taskmanager.numberOfTaskSlots: 2\n"));
        assert!(yaml.contains("taskmanager.memory.process.size: 1280m\n"));
        assert!(yaml.contains(
            "env.java.opts.all: \"--add-opens=x -Dpekko.remote.classic.startup-timeout=60s\"\n"
        ));
        assert!(yaml.contains("jobmanager.bind-host: 127.0.0.1\n"));
        assert!(
            yaml.contains("web.timeout: 30 s\n"),
            "the killed TaskManager must not freeze the copy's metrics for 10 min"
        );
        let mut remote = (**plan).clone();
        remote.jobmanager_address = "10.0.0.5".into();
        let yaml_remote = config_yaml(&remote, "");
        assert!(yaml_remote.contains("jobmanager.rpc.address: 10.0.0.5\n"));
        assert!(yaml_remote.contains("jobmanager.bind-host: 0.0.0.0\n"));
        for line in yaml
            .lines()
            .filter(|l| l.contains('/') && !l.starts_with('#'))
        {
            assert!(line.contains("/lab/profiling/prof-b3-c0/"), "{line}");
        }
    }
}

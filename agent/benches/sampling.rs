//! Cost of one `Sampler` tick: CPU time and wall time per tick, and this process's RSS after
//! the ticks, against the agent's budget (≤ 0.2 % of one core at 1 Hz, ≤ 8 MiB RSS).
//!
//! `cargo bench -p demeter-agent --bench sampling`
//!
//! Scenarios: fake /proc trees with N TaskManagers (each with a real G1 hsperfdata file) among
//! 300 other processes, then the real /proc with `DEMETER_BENCH_REAL_TMS` (default 2) idle
//! TaskManager JVMs this bench starts and kills. `DEMETER_BENCH_TICKS` sets the ticks per
//! scenario (default 1000). Ticks are timestamped 1 s apart, so discovery runs every tenth tick
//! as at 1 Hz; a second run per scenario rescans every tick to show discovery's own cost.

#![allow(clippy::unwrap_used, clippy::expect_used)] // A bench may panic on setup failure.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use demeter_agent::collectors::discovery::TASK_MANAGER_MAIN_CLASS;
use demeter_agent::collectors::host::HostCollector;
use demeter_agent::collectors::{Sampler, SamplerConfig};
use rustix::time::{ClockId, clock_gettime};

const DECOY_PROCESSES: u32 = 300;

fn cpu_time() -> Duration {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A /proc look-alike: `task_managers` TaskManagers with hsperfdata in their own /tmp, plus
/// decoy processes that discovery must read and reject.
fn fake_proc(root: &Path, task_managers: u32) {
    let hsperf = std::fs::read(support::fixture("hsperf/g1.hsperfdata")).unwrap();
    for i in 0..task_managers {
        let pid = 100_000 + i;
        let dir = root.join(pid.to_string());
        let tmp = dir.join("root/tmp/hsperfdata_flink");
        std::fs::create_dir_all(&tmp).unwrap();
        let cmdline = format!(
            "java\0-Xmx1g\0-cp\0/opt/flink/lib/*\0{TASK_MANAGER_MAIN_CLASS}\0-D\0taskmanager.resource-id=tm-{i}\0"
        );
        std::fs::write(dir.join("cmdline"), cmdline).unwrap();
        let stat =
            format!("{pid} (java) S 1 {pid} {pid} 0 -1 0 0 0 0 0 {i} 7 0 0 20 0 40 0 99000 0 0\n");
        std::fs::write(dir.join("stat"), stat).unwrap();
        std::fs::write(dir.join("statm"), "800000 50000 4000 1 0 700000 0\n").unwrap();
        let status = format!("Name:\tjava\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t{pid}\n");
        std::fs::write(dir.join("status"), status).unwrap();
        std::fs::write(tmp.join(pid.to_string()), &hsperf).unwrap();
    }
    for i in 0..DECOY_PROCESSES {
        let dir = root.join((200_000 + i).to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let cmdline = format!("/usr/sbin/daemon-{i}\0--config\0/etc/daemon.conf\0");
        std::fs::write(dir.join("cmdline"), cmdline).unwrap();
    }
}

/// Runs `ticks` ticks 1 s apart (agent time) and prints the mean CPU and wall time per tick.
/// Other helpers' TaskManagers may come and go on the real /proc, hence "at least".
fn run(label: &str, config: SamplerConfig, ticks: u32, min_jvms: usize) {
    let mut sampler = Sampler::new(config).unwrap();
    let start_ms = 1_700_000_000_000u64;
    // Warm-up tick: discovery plus first hsperfdata location.
    assert!(sampler.sample(start_ms).jvms.len() >= min_jvms, "{label}");
    let (cpu0, wall0) = (cpu_time(), Instant::now());
    for tick in 1..=u64::from(ticks) {
        let sample = sampler.sample(start_ms + tick * 1000);
        assert!(sample.jvms.len() >= min_jvms, "{label}");
        std::hint::black_box(sample);
    }
    let cpu = (cpu_time() - cpu0) / ticks;
    let wall = wall0.elapsed() / ticks;
    println!(
        "{label:<62} cpu {:>8.1} µs/tick  wall {:>8.1} µs/tick  = {:.4} % of a core at 1 Hz",
        cpu.as_secs_f64() * 1e6,
        wall.as_secs_f64() * 1e6,
        cpu.as_secs_f64() * 100.0,
    );
}

/// In a tight loop sysinfo skips re-reading /proc/stat within 200 ms of the last read, so the
/// host read is measured alone, spaced as at 1 Hz.
fn host_read_cost() {
    let mut host = HostCollector::new().unwrap();
    let mut cpu = Duration::ZERO;
    let reads = 8;
    for _ in 0..reads {
        std::thread::sleep(Duration::from_millis(210));
        let before = cpu_time();
        std::hint::black_box(host.read());
        cpu += cpu_time() - before;
    }
    println!(
        "{:<62} cpu {:>8.1} µs/read (included in the ticks above only every 200 ms)",
        "host read (sysinfo, refresh not skipped)",
        (cpu / reads).as_secs_f64() * 1e6
    );
}

fn both_cadences(label: &str, config: SamplerConfig, ticks: u32, min_jvms: usize) {
    run(
        &format!("{label}, discovery every 10 s"),
        config.clone(),
        ticks,
        min_jvms,
    );
    let every_tick = SamplerConfig {
        discovery_interval_ms: 0,
        ..config
    };
    run(
        &format!("{label}, discovery every tick"),
        every_tick,
        ticks,
        min_jvms,
    );
}

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn main() {
    let ticks = env_number("DEMETER_BENCH_TICKS", 1000);
    let real_tms = env_number("DEMETER_BENCH_REAL_TMS", 2);
    println!(
        "{ticks} ticks per scenario; RSS before: {} KiB",
        rss_kib("VmRSS:")
    );
    host_read_cost();
    for n in [0, 1, 4, 16] {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path(), n);
        let config = SamplerConfig {
            proc_root: dir.path().to_owned(),
            host_tmp: dir.path().join("no-host-tmp"),
            ..SamplerConfig::default()
        };
        let label = format!("fake /proc, {n} TMs + {DECOY_PROCESSES} others");
        both_cadences(&label, config, ticks, n as usize);
    }

    let dir = tempfile::tempdir().unwrap();
    let (package, class) = TASK_MANAGER_MAIN_CLASS.rsplit_once('.').unwrap();
    let program = support::idle_program(Some(package), class);
    let classes = support::compile(dir.path(), TASK_MANAGER_MAIN_CLASS, &program);
    let classes = classes.to_str().unwrap();
    let jvms: Vec<_> = (0..real_tms)
        .map(|i| {
            let id = format!("taskmanager.resource-id=bench-{i}");
            let args = [
                "-Xmx32m",
                "-cp",
                classes,
                TASK_MANAGER_MAIN_CLASS,
                "-D",
                &id,
            ];
            support::start_java(&args)
        })
        .collect();
    // Other agents' TaskManagers may be running on this shared machine too.
    let present = Sampler::new(SamplerConfig::default())
        .unwrap()
        .sample(0)
        .jvms
        .len();
    let processes = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    let label = format!("real /proc, {present} TMs ({real_tms} ours), {processes} procs");
    both_cadences(&label, SamplerConfig::default(), ticks, real_tms as usize);
    drop(jvms);
    println!(
        "RSS after all scenarios: {} KiB (peak {} KiB)",
        rss_kib("VmRSS:"),
        rss_kib("VmHWM:")
    );
}

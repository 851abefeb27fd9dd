//! `demeter-coordinator profile …`: one profiling batch on real Flink, by hand. Each
//! `--config` runs as its own small Flink cluster on this host (JobManager and TaskManagers
//! as child processes, ports from the profiling ranges, everything under `--work-dir`), fed the
//! profiling arguments at `--rate`; prints progress per copy and a summary, and writes (or
//! appends to) an observations CSV that `model fit` reads.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use demeter_coordinator::executor::driver::now_ms;
use demeter_coordinator::flink::ClientConfig;
use demeter_coordinator::models::observations::to_csv;
use demeter_coordinator::models::space::JobConfig;
use demeter_coordinator::profiler::batch::{
    BatchReport, BatchRequest, Progress, Recall, Runtime, run_batch,
};
use demeter_coordinator::profiler::host::LocalHost;
use demeter_coordinator::profiler::{
    CopyOutcome, CopyReport, Layout, Phase, PortRange, Resources, Times,
};

use super::simulate::parse_duration;

#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  demeter-coordinator profile --jar demeter-bench.jar \
    --entry-class io.demeter.bench.BenchJob --profile-args '--rate {rate} --sink discard' \
    --rate 3000 --config p=2,slots=1,mem=1024m,cpu=1,ckpt=10s \
    --config p=2,slots=2,mem=2g,cpu=1,ckpt=10s --observations-out obs.csv"
)]
pub struct ProfileArgs {
    /// The job's jar.
    #[arg(long)]
    jar: PathBuf,
    #[arg(long)]
    entry_class: String,
    /// The job's profiling arguments; `{rate}` becomes --rate, `{output}` the copy's own output
    /// directory (file:// URI), `{dir}` the copy's directory. Other paths are refused.
    #[arg(long, allow_hyphen_values = true)]
    profile_args: String,
    /// Records per second fed to every copy.
    #[arg(long)]
    rate: f64,
    /// A candidate configuration, e.g. `p=2,slots=1,mem=1024m,cpu=1,ckpt=10s` (repeat).
    #[arg(long = "config", required = true)]
    configs: Vec<JobConfig>,
    /// Warm-up after the job runs, before measuring.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    warmup: Duration,
    /// Measurement window.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    measure: Duration,
    /// Recovery after the injected failure longer than this is reported as this (censored).
    #[arg(long, default_value = "180s", value_parser = parse_duration)]
    max_recovery: Duration,
    /// Write the observations here (appended when the file exists with the same header).
    #[arg(long)]
    observations_out: Option<PathBuf>,
    /// Flink installation (bin/jobmanager.sh, bin/taskmanager.sh, conf/).
    #[arg(long, env = "FLINK_HOME")]
    flink_home: PathBuf,
    /// Copies' directories go under here (each removed with its copy).
    #[arg(
        long,
        env = "DEMETER_PROFILING_DIR",
        default_value = "/var/lib/demeter/profiling"
    )]
    work_dir: PathBuf,
    /// REST ports of the copies, FIRST-LAST.
    #[arg(long, default_value = "18500-18519", value_parser = parse_ports)]
    rest_ports: PortRange,
    /// JobManager RPC ports of the copies, FIRST-LAST.
    #[arg(long, default_value = "16500-16519", value_parser = parse_ports)]
    rpc_ports: PortRange,
    /// Cap on the CPU cores all copies together may book (TaskManagers' cpu + JobManagers').
    #[arg(long, default_value_t = 4.0)]
    cap_cpu: f64,
    /// Cap on the memory all copies together may book, e.g. `8g`.
    #[arg(long, default_value = "8g", value_parser = parse_mb)]
    cap_memory: u32,
    /// Memory left to production and everything else: copies that would eat into it are
    /// skipped.
    #[arg(long, default_value = "2g", value_parser = parse_mb)]
    host_reserve: u32,
    /// JobManager process size of a copy.
    #[arg(long, default_value = "768m", value_parser = parse_mb)]
    jm_memory: u32,
    /// The job's latency metric (max over the vertices and subtasks reporting it).
    #[arg(long, default_value = "window.latencyP95Ms")]
    latency_metric: String,
    /// Batch number (names the copies `prof-b<batch>-c<i>`); default: the time in seconds.
    #[arg(long)]
    batch: Option<u64>,
}

fn parse_ports(text: &str) -> Result<PortRange, String> {
    let (a, b) = text
        .split_once('-')
        .ok_or_else(|| format!("{text:?} is not FIRST-LAST"))?;
    let (first, last): (u16, u16) = (
        a.trim().parse().map_err(|_| format!("bad port {a:?}"))?,
        b.trim().parse().map_err(|_| format!("bad port {b:?}"))?,
    );
    if last < first {
        return Err(format!("{text:?}: LAST is below FIRST"));
    }
    Ok(PortRange {
        first,
        count: last - first + 1,
    })
}

fn parse_mb(text: &str) -> Result<u32, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, scale) = match lower.strip_suffix('g') {
        Some(n) => (n, 1024.0),
        None => (lower.strip_suffix('m').unwrap_or(&lower), 1.0),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size like 768m or 8g"))?;
    let mb = (value * scale).round();
    if !(mb.is_finite() && mb > 0.0 && mb <= f64::from(u32::MAX)) {
        return Err(format!("{text:?} is not a positive size"));
    }
    Ok(mb as u32)
}

/// Prints one line per phase change and per finished copy.
struct Printer {
    started: u64,
}

impl Progress for Printer {
    fn phase(&self, copy: &str, phase: Phase, since_start_ms: u64) {
        let at = now_ms().saturating_sub(self.started) as f64 / 1000.0;
        println!(
            "[{at:7.1}s] {copy}: {phase:?} (copy age {:.1}s)",
            since_start_ms as f64 / 1000.0
        );
    }
    fn skipped(&self, config: &JobConfig, reason: &str) {
        println!("skipped {config}: {reason}");
    }
    fn finished(&self, r: &CopyReport) {
        let at = now_ms().saturating_sub(self.started) as f64 / 1000.0;
        let recovery = r.recovery.as_ref().map_or(String::new(), |rec| {
            format!(
                "; after the kill: RUNNING {:.1}s, flowing {:.1}s, drained {:.1}s{}",
                rec.running_ms as f64 / 1000.0,
                rec.flowing_ms as f64 / 1000.0,
                rec.drained_ms as f64 / 1000.0,
                if rec.censored { " (cap)" } else { "" }
            )
        });
        println!(
            "[{at:7.1}s] {}: finished, {}{recovery}",
            r.name,
            outcome_text(&r.outcome)
        );
    }
}

fn outcome_text(o: &CopyOutcome) -> String {
    match o {
        CopyOutcome::Measured(_) => "measured".into(),
        CopyOutcome::Failed(why) => format!("failed: {why}"),
        CopyOutcome::Aborted(why) => format!("aborted: {why}"),
    }
}

pub fn run(args: ProfileArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(profile(args))
}

async fn profile(args: ProfileArgs) -> anyhow::Result<()> {
    if !args.jar.is_file() {
        bail!("no jar at {}", args.jar.display());
    }
    std::fs::create_dir_all(&args.work_dir)
        .with_context(|| format!("creating {}", args.work_dir.display()))?;
    let host = LocalHost::new(args.flink_home.clone(), f64::from(args.host_reserve))?;
    let times = Times {
        warmup_ms: args.warmup.as_millis() as u64,
        measure_ms: args.measure.as_millis() as u64,
        max_recovery_ms: args.max_recovery.as_millis() as u64,
        ..Times::default()
    };
    let runtime = Arc::new(Runtime {
        flink_home: args.flink_home.clone(),
        jar: args.jar.clone(),
        entry_class: args.entry_class.clone(),
        latency_metric: args.latency_metric.clone(),
        times,
        host: Arc::new(host),
        client: ClientConfig::default(),
    });
    let layout = Layout {
        rest_ports: args.rest_ports,
        rpc_ports: args.rpc_ports,
        root: args.work_dir.clone(),
        jm_memory_mb: args.jm_memory,
        jm_cpu_cores: 0.25,
        cap: Resources {
            cpu_cores: args.cap_cpu,
            memory_mb: f64::from(args.cap_memory),
        },
        jobmanager_address: demeter_coordinator::profiler::plan::loopback(),
    };
    let request = BatchRequest {
        batch: args.batch.unwrap_or_else(|| now_ms() / 1000),
        candidates: args.configs.clone(),
        rate: args.rate,
        template: args.profile_args.clone(),
    };
    let recall = Recall::default();
    let on_signal = recall.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.recall("interrupted (Ctrl-C)");
        }
    });
    let printer = Arc::new(Printer { started: now_ms() });
    let report = run_batch(
        runtime,
        &layout,
        &request,
        Resources::default(),
        &recall,
        printer,
    )
    .await?;
    print_summary(&report);
    let observations = report.observations();
    if let Some(path) = &args.observations_out
        && !observations.is_empty()
    {
        write_observations(path, &to_csv(&observations)?)?;
        println!(
            "{} observation(s) written to {}",
            observations.len(),
            path.display()
        );
    }
    let left: Vec<String> = report
        .copies
        .iter()
        .filter_map(|c| c.teardown_error.clone())
        .collect();
    if !left.is_empty() {
        bail!("tear-down incomplete: {}", left.join("; "));
    }
    if observations.is_empty() {
        bail!("no copy produced a measurement");
    }
    Ok(())
}

fn print_summary(report: &BatchReport) {
    println!(
        "\nbatch {}: {} copies, {} skipped, {:.1} s",
        report.batch,
        report.copies.len(),
        report.skipped.len(),
        report.wall_ms as f64 / 1000.0
    );
    println!(
        "{:<22} {:<36} {:>9} {:>6} {:>9} {:>10} {:>6} {:>8}  outcome",
        "copy", "config", "start-up", "busy", "p95 ms", "recovery", "cpu", "mem MiB"
    );
    let num = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    for c in &report.copies {
        let o = match &c.outcome {
            CopyOutcome::Measured(o) => Some(o),
            _ => None,
        };
        let recovery = c.recovery.as_ref().map(|r| {
            format!(
                "{:.1}s{}",
                r.drained_ms as f64 / 1000.0,
                if r.censored { "+" } else { "" }
            )
        });
        println!(
            "{:<22} {:<36} {:>9} {:>6} {:>9} {:>10} {:>6} {:>8}  {}",
            c.name,
            c.config.to_string(),
            num(c.startup_ms.map(|ms| ms as f64 / 1000.0), 1),
            num(o.and_then(|o| o.busy_fraction), 3),
            num(o.map(|o| o.latency_p95_ms), 0),
            recovery.unwrap_or_else(|| "-".into()),
            num(o.map(|o| o.cpu_cores), 2),
            num(o.map(|o| o.memory_mb), 0),
            outcome_text(&c.outcome)
        );
    }
}

/// Writes the CSV, or appends its rows when the file already holds observations with the
/// same header (so batches accumulate for `model fit`).
fn write_observations(path: &std::path::Path, csv: &str) -> anyhow::Result<()> {
    let (header, rows) = csv.split_once('\n').unwrap_or((csv, ""));
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let existing_header = existing
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let text = match existing_header {
        None => csv.to_string(),
        Some(h) if h.trim() == header.trim() => {
            let sep = if existing.ends_with('\n') { "" } else { "\n" };
            format!("{existing}{sep}{rows}")
        }
        Some(h) => bail!(
            "{} has another header ({h:?}); not appending observations to it",
            path.display()
        ),
    };
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

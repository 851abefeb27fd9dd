//! What `simulate` prints and writes: a summary per policy, the comparison table normalised to
//! `static`, the timeline CSV and the decisions as JSON lines.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use demeter_coordinator::twin::report::Summary;
use demeter_coordinator::twin::second::SimPhase;

use super::simulate::Outcome;

pub fn print_summary(outcome: &Outcome) {
    let s = &outcome.run.summary;
    println!("policy {}", s.policy);
    println!(
        "  CPU     {:>9.1} core-h  (production {:.1}, profiling {:.1})  = {:.3} × static ({:.1})",
        s.cpu_core_hours.total,
        s.cpu_core_hours.production,
        s.cpu_core_hours.profiling,
        s.cpu_ratio,
        s.static_cpu_core_hours
    );
    println!(
        "  memory  {:>9.1} GB-h    (production {:.1}, profiling {:.1})  = {:.3} × static ({:.1})",
        s.memory_gb_hours.total,
        s.memory_gb_hours.production,
        s.memory_gb_hours.profiling,
        s.memory_ratio,
        s.static_memory_gb_hours
    );
    println!(
        "  cost    {:.3} × static (½ CPU + ½ memory; production only {:.3})",
        s.cost, s.production_cost
    );
    let o = &s.seconds_over_latency;
    println!(
        "  latency {:.2} % of seconds over {} ms outside failure recoveries (the target's figure): \
         {} s steady + {} s in changes, of {} s",
        s.percent_over_latency,
        s.qos.latency_p95_ms,
        o.steady,
        o.change,
        s.seconds - s.seconds_in_failure_recovery
    );
    println!(
        "          plus {} s over inside failure recoveries ({} s in recoveries); all causes {} s = {:.2} % of {} s",
        o.failure_recovery,
        s.seconds_in_failure_recovery,
        o.total,
        s.percent_over_latency_incl_failures,
        s.seconds
    );
    println!(
        "  failures {}: recovery mean {:.0} s, max {:.0} s, {} over {} s, {} cut short by the next failure",
        s.failures,
        s.mean_recovery_s(),
        s.max_recovery_s(),
        s.recoveries_over_qos,
        s.qos.recovery_s,
        s.recoveries_censored
    );
    println!(
        "  changes {} (in place {}, full restart {}, rolled back {}, refused {}); downtime {:.0} s for changes \
         ({} s from change to caught up), {:.0} s for failures",
        s.reconfigurations(),
        s.changes.in_place,
        s.changes.full_restart,
        s.changes.rolled_back,
        s.changes.refused,
        s.downtime_changes_s,
        s.seconds_in_changes,
        s.downtime_failures_s
    );
    let p = &s.profiling;
    println!(
        "  profiling {} of {} batches run ({} deferred, {} dropped after waiting), {} of {} copies \
         ({} left out for room, {} torn down for production) on the spare of a {:.0}-core, {:.0} GB cluster",
        p.batches_started,
        p.batches_ordered,
        p.batches_deferred,
        p.batches_expired,
        p.copies_started,
        p.copies_ordered,
        p.copies_dropped,
        p.copies_preempted,
        s.cluster_cpu_cores,
        s.cluster_memory_mb / 1024.0
    );
    if let Some(d) = s.decision_time {
        println!(
            "  decision time {:.1} ms in {} calls (max {:.3} ms); replay took {:.2} s",
            d.total_ms,
            d.calls,
            d.max_ms,
            outcome.wall.as_secs_f64()
        );
    }
}

/// The comparison: every ratio relative to `static` (the static configuration's allocation).
pub fn print_comparison(outcomes: &[Outcome]) {
    println!(
        "{:<9} {:>6} {:>6} {:>6} {:>6} {:>6} {:>16} {:>7} {:>16} {:>10} {:>8} {:>10} {:>7}",
        "policy",
        "CPU",
        "mem",
        "cost",
        "prof%",
        ">QoS%",
        ">QoS s st/ch/fa",
        "all%",
        "recov mean/max/>",
        "ip/fr/rb",
        "profiled",
        "decide ms",
        "wall s"
    );
    for outcome in outcomes {
        let s = &outcome.run.summary;
        let profiling_share = if s.cpu_core_hours.total > 0.0 {
            100.0 * (s.cpu_core_hours.profiling / s.cpu_core_hours.total)
        } else {
            0.0
        };
        let o = &s.seconds_over_latency;
        println!(
            "{:<9} {:>6.3} {:>6.3} {:>6.3} {:>6.1} {:>6.2} {:>16} {:>7.2} {:>16} {:>10} {:>8} {:>10.1} {:>7.2}",
            s.policy,
            s.cpu_ratio,
            s.memory_ratio,
            s.cost,
            profiling_share,
            s.percent_over_latency,
            format!("{}/{}/{}", o.steady, o.change, o.failure_recovery),
            s.percent_over_latency_incl_failures,
            format!(
                "{:.0}/{:.0}/{}",
                s.mean_recovery_s(),
                s.max_recovery_s(),
                s.recoveries_over_qos
            ),
            format!(
                "{}/{}/{}",
                s.changes.in_place, s.changes.full_restart, s.changes.rolled_back
            ),
            format!("{}/{}", s.profiling_copies, s.profiling_batches),
            s.decision_time.map_or(0.0, |d| d.total_ms),
            outcome.wall.as_secs_f64()
        );
    }
    println!("{LEGEND}");
}

/// What the comparison's columns mean (README-ready).
pub const LEGEND: &str = "\
CPU, mem, cost: core-hours, GB-hours and ½ CPU + ½ mem, profiling included, relative to the static
  configuration's allocation over the same seconds; prof%: profiling's share of the CPU.
>QoS%: seconds with p95 latency over the latency QoS OUTSIDE failure recoveries, in % of the seconds
  outside failure recoveries: the figure the latency target is checked against.
>QoS s st/ch/fa: those seconds by cause: steady (the configuration did not carry the rate) /
  changes (a reconfiguration's downtime and catch-up) / failure recoveries (failure -> backlog
  drained, excused up to the recovery QoS: that is the recovery QoS's business, and every policy
  gets the same injected failures; a longer recovery's later seconds count as steady).
all%: every second over the latency QoS, failure recoveries included, in % of all seconds.
recov mean/max/>: failure -> caught up, seconds, and how many recoveries exceeded the recovery QoS.
ip/fr/rb: reconfigurations in place / full restart / rolled back. profiled: copies/batches run
  (on the cluster's spare capacity only: production always wins).";

/// The timeline row as written, with the policy first.
#[derive(Serialize)]
struct Row<'a> {
    policy: &'a str,
    t_s: u64,
    rate: f64,
    config: &'a str,
    phase: SimPhase,
    latency_p95_ms: f64,
    over_qos_steady_s: u32,
    over_qos_change_s: u32,
    over_qos_failure_s: u32,
    backlog: f64,
    cpu_alloc: f64,
    memory_alloc_mb: f64,
    profiling_cpu: f64,
    profiling_memory_mb: f64,
    forecast_point: Option<f64>,
    forecast_upper: Option<f64>,
}

pub fn write_timeline(path: &Path, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let mut writer =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    for outcome in outcomes {
        let policy = outcome.run.summary.policy.as_str();
        for r in &outcome.run.timeline {
            writer.serialize(Row {
                policy,
                t_s: r.t_s,
                rate: r.rate,
                config: &r.config,
                phase: r.phase,
                latency_p95_ms: r.latency_p95_ms,
                over_qos_steady_s: r.over_qos_steady_s,
                over_qos_change_s: r.over_qos_change_s,
                over_qos_failure_s: r.over_qos_failure_s,
                backlog: r.backlog,
                cpu_alloc: r.cpu_alloc,
                memory_alloc_mb: r.memory_alloc_mb,
                profiling_cpu: r.profiling_cpu,
                profiling_memory_mb: r.profiling_memory_mb,
                forecast_point: r.forecast_point,
                forecast_upper: r.forecast_upper,
            })?;
        }
    }
    writer
        .flush()
        .with_context(|| format!("writing {}", path.display()))
}

pub fn write_decisions(path: &Path, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for outcome in outcomes {
        let summary: &Summary = &outcome.run.summary;
        for event in &outcome.run.events {
            let mut value = serde_json::to_value(event)?;
            if let Some(map) = value.as_object_mut() {
                map.insert("policy".into(), summary.policy.clone().into());
            }
            writeln!(out, "{value}")?;
        }
    }
    out.flush()
        .with_context(|| format!("writing {}", path.display()))
}

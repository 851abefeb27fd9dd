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
    println!(
        "  latency {} s over {} ms ({:.2} % of {} s)",
        s.seconds_over_latency, s.qos.latency_p95_ms, s.percent_over_latency, s.seconds
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
        "  changes {} (in place {}, full restart {}, rolled back {}, refused {}); downtime {:.0} s for changes, {:.0} s for failures",
        s.reconfigurations(),
        s.changes.in_place,
        s.changes.full_restart,
        s.changes.rolled_back,
        s.changes.refused,
        s.downtime_changes_s,
        s.downtime_failures_s
    );
    println!(
        "  profiling {} batches, {} copies",
        s.profiling_batches, s.profiling_copies
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
        "{:<9} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>13} {:>14} {:>8} {:>10} {:>7}",
        "policy",
        "CPU",
        "mem",
        "cost",
        "prof%",
        ">QoS%",
        ">QoS s",
        "recov mean/max",
        "changes ip/fr/rb",
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
        println!(
            "{:<9} {:>6.3} {:>6.3} {:>6.3} {:>6.1} {:>6.2} {:>9} {:>13} {:>14} {:>8} {:>10.1} {:>7.2}",
            s.policy,
            s.cpu_ratio,
            s.memory_ratio,
            s.cost,
            profiling_share,
            s.percent_over_latency,
            s.seconds_over_latency,
            format!("{:.0}/{:.0}", s.mean_recovery_s(), s.max_recovery_s()),
            format!(
                "{}/{}/{}",
                s.changes.in_place, s.changes.full_restart, s.changes.rolled_back
            ),
            s.profiling_copies,
            s.decision_time.map_or(0.0, |d| d.total_ms),
            outcome.wall.as_secs_f64()
        );
    }
    println!(
        "CPU, mem, cost: total (profiling included) / static's allocation; prof%: profiling share of CPU; \
         >QoS: seconds with p95 latency over the QoS; recov: failure → caught up (s); \
         changes: in place / full restart / rolled back; profiled: copies run"
    );
}

/// The timeline row as written, with the policy first.
#[derive(Serialize)]
struct Row<'a> {
    policy: &'a str,
    t_s: u64,
    rate: f64,
    config: &'a str,
    phase: SimPhase,
    latency_p95_ms: f64,
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

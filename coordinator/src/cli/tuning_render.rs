//! What `job tuning NAME` prints: the live loop's newest reading against its forecast, what runs
//! and what is in flight, then the newest decisions with their reasons and outcomes.

use demeter_common::protocol::tuning::TuningView;

fn clock(ms: u64) -> String {
    let s = (ms / 1000) % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

fn opt(v: Option<f64>, digits: usize, unit: &str) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}{unit}"))
}

pub fn tuning(view: &TuningView, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(view)?);
        return Ok(());
    }
    let Some(policy) = &view.policy else {
        println!(
            "{} is not tuned by this coordinator (not in its [tuning] table)",
            view.job
        );
        return Ok(());
    };
    println!("{} — tuned by the {policy} policy", view.job);
    match &view.live {
        None => println!("  no reading yet (the job is not deployed, or the loop just started)"),
        Some(l) => {
            println!("  {} UTC  {}  {}", clock(l.at_ms), l.phase, l.config);
            let forecast = l
                .forecast
                .map_or("no forecast yet".into(), |(h, point, upper)| {
                    format!("forecast max over {h} s: {point:.0}/s (upper {upper:.0}/s)")
                });
            println!("  rate {:.0}/s   {forecast}", l.rate);
            println!(
                "  p95 latency {}   busy {}   {:.2} cores, {:.0} MiB used",
                opt(l.latency_p95_ms, 0, " ms"),
                opt(l.busy_fraction.map(|b| b * 100.0), 0, " %"),
                l.cpu_cores,
                l.memory_mb
            );
            if let Some(to) = &l.reconfiguring {
                println!("  reconfiguring to {to}");
            }
            if let Some(batch) = l.profiling {
                println!("  profiling batch {batch} running");
            }
            let t = &l.totals;
            let share = |s: f64| {
                if t.observed_s > 0.0 {
                    100.0 * s / t.observed_s
                } else {
                    0.0
                }
            };
            println!(
                "  so far: {:.0} s observed, {:.1} % over the latency QoS, {:.1} % down; \
                 {:.3} core-h and {:.3} GiB-h allocated (profiling copies {:.3} and {:.3} of them); \
                 {} reconfigurations, {} profiling batches",
                t.observed_s,
                share(t.over_qos_s),
                share(t.down_s),
                (t.cpu_core_s + t.profiling_cpu_core_s) / 3600.0,
                (t.memory_gib_s + t.profiling_memory_gib_s) / 3600.0,
                t.profiling_cpu_core_s / 3600.0,
                t.profiling_memory_gib_s / 3600.0,
                t.reconfigurations,
                t.profiling_batches
            );
        }
    }
    if view.decisions.is_empty() {
        println!("\nno decisions yet");
        return Ok(());
    }
    println!("\ndecisions (oldest first):");
    for d in &view.decisions {
        println!(
            "  #{} {} {}: {}",
            d.seq,
            clock(d.at_ms),
            d.action,
            d.outcome.as_deref().unwrap_or("in flight")
        );
        println!("      why: {}", d.reason);
        if let Some(f) = &d.forecast {
            println!("      forecast: {f}");
        }
        if let Some(c) = &d.chosen {
            println!("      chosen: {c}");
        }
        if let Some(r) = &d.rejected {
            println!("      best rejected: {r}");
        }
    }
    Ok(())
}

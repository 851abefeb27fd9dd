//! GP timings: fit (with hyperparameter optimisation), batch prediction over a configuration
//! grid, one-observation update, and one whole decision at n = 500. Prints a table.
//!
//! `cargo bench -p demeter-coordinator --bench gp`; `DEMETER_BENCH_QUICK=1` for a short run.

mod gp_workload;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use demeter_coordinator::models::gp::{FitOptions, Gp, ZeroMean};
use gp_workload::{D, acquire, enough, grid, hartmann6, memory, outcome, points, posteriors};
use rand::SeedableRng;
use rand::rngs::StdRng;

/// CPU time of this thread: the machine is shared with other builds, so wall time overstates
/// what one core needs.
fn cpu_now() -> Duration {
    cpu_time::ThreadTime::now().as_duration()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..reps)
            .map(|_| {
                let t = cpu_now();
                black_box(f());
                cpu_now() - t
            })
            .collect(),
    )
}

fn ms(d: Duration) -> String {
    format!("{:9.3}", d.as_secs_f64() * 1e3)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::var_os("DEMETER_BENCH_QUICK").is_some();
    let reps = if quick { 2 } else { 5 };
    let sizes: &[usize] = if quick {
        &[50, 200]
    } else {
        &[50, 200, 500, 1000]
    };
    let cands = grid();
    let mut rng = StdRng::seed_from_u64(42);
    let options = FitOptions::default();

    println!(
        "GP benchmark: d = {D}, {} candidates, median of {reps} runs, thread CPU time (ms)",
        cands.len()
    );
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "n", "fit+hyper", "fit fixed", "predict", "update", "rmse"
    );
    let decision_only = std::env::var_os("DEMETER_BENCH_DECISION_ONLY").is_some();
    for &n in sizes.iter().filter(|_| !decision_only) {
        let xs = points(n, &mut rng);
        let ys: Vec<f64> = xs.iter().map(|x| outcome(0, x, &mut rng)).collect();
        let fit_reps = if n >= 1000 { 1.max(reps / 2) } else { reps };
        let fit = time(fit_reps, || Gp::fit(&xs, &ys, Arc::new(ZeroMean), &options));
        let gp = Gp::fit(&xs, &ys, Arc::new(ZeroMean), &options)?;
        let hyper = gp.hyperparameters().clone();
        let fixed = time(reps, || {
            Gp::new(&xs, &ys, Arc::new(ZeroMean), hyper.clone())
        });
        let predict = time(reps, || gp.predict_batch(&cands));
        let extra = points(reps, &mut rng);
        let mut updates = Vec::new();
        for x in &extra {
            let mut g = gp.clone();
            let y = outcome(0, x, &mut rng);
            let t = cpu_now();
            g.add_observation(x, y)?;
            updates.push(cpu_now() - t);
        }
        let test = points(200, &mut rng);
        let p = gp.predict_batch(&test)?;
        let rmse = (test
            .iter()
            .enumerate()
            .map(|(i, x)| (p.mean[i] - hartmann6(x)).powi(2))
            .sum::<f64>()
            / test.len() as f64)
            .sqrt();
        println!(
            "{n:>6} {} {} {} {} {:10.4}",
            ms(fit),
            ms(fixed),
            ms(predict),
            ms(median(updates)),
            rmse
        );
    }

    // One decision at n = 500: 4 GP outcomes (CPU use as a modelled objective, 3 constraints:
    // throughput shortfall, latency, recovery), memory a known objective, q = 4 batch plus the
    // enough-known test. Hyperparameters are reused (GPs conditioned beforehand).
    let n = 500;
    let xs = points(n, &mut rng);
    let mut gps = Vec::new();
    for k in 0..4 {
        let ys: Vec<f64> = xs.iter().map(|x| outcome(k, x, &mut rng)).collect();
        gps.push(Gp::fit(&xs, &ys, Arc::new(ZeroMean), &options)?);
    }
    let memory = memory(&cands);
    let mut phases = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let decisions = if quick { 3 } else { 11 };
    let mut last = None;
    for seed in 0..decisions {
        let t0 = cpu_now();
        let posts = posteriors(&gps, &cands);
        let t1 = cpu_now();
        let acquired = acquire(posts, &memory, seed);
        let t2 = cpu_now();
        let enough = enough(&acquired, &memory);
        let t3 = cpu_now();
        phases[0].push(t1 - t0);
        phases[1].push(t2 - t1);
        phases[2].push(t3 - t2);
        phases[3].push(t3 - t0);
        last = Some((acquired.batch, enough));
    }
    let [predict, acquire, enough, total] = phases.map(median);
    println!();
    println!(
        "One decision at n = {n}, {} candidates, 4 GPs, q = 4 (median of {decisions}, CPU ms):",
        cands.len()
    );
    println!(
        "  predict 4 GPs (posterior incl. cross terms) {}",
        ms(predict)
    );
    println!(
        "  acquisition + batch selection (q = 4, KB)   {}",
        ms(acquire)
    );
    println!(
        "  enough-known test                           {}",
        ms(enough)
    );
    println!(
        "  whole decision                              {}   (target ≤ 50 ms)",
        ms(total)
    );
    if let Some((batch, enough)) = last {
        let picks: Vec<usize> = batch.iter().map(|c| c.index).collect();
        println!(
            "  last decision: picks {picks:?} ({:?}), miss probability {:.3}, enough = {}",
            batch.first().map(|c| c.mode),
            enough.miss_probability,
            enough.enough
        );
    }
    Ok(())
}

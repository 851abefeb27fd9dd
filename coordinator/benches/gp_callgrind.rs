//! One GP operation at one size, for counting instructions under callgrind: the machine is
//! shared, so CPU times wobble by ±20 %, while instruction counts repeat exactly.
//!
//! ```text
//! cargo bench -p demeter-coordinator --bench gp_callgrind --no-run   # prints the binary path
//! BIN=target/release/deps/gp_callgrind-…
//! $BIN decision 500 /tmp/hyper-500.json      # natively once: fits and saves hyperparameters
//! valgrind --tool=callgrind --toggle-collect='*measured*' $BIN decision 500 /tmp/hyper-500.json
//! ```
//!
//! Operations: `fit-hyper` (hyperparameter optimisation + conditioning), `fit` (conditioning
//! with the saved hyperparameters), `predict` (840 candidates), `update` (one observation),
//! `decision` (the `gp` bench's whole decision: 4 GPs, q = 4, enough-known). Only the
//! `measured_*` functions are counted (`--toggle-collect`); setup is not. Valgrind hides
//! AVX-512, so GEMM runs its AVX2/FMA kernel there: compare counts with counts only.

mod gp_workload;

use std::hint::black_box;
use std::sync::Arc;

use demeter_coordinator::models::gp::{FitOptions, Gp, Hyperparameters, ZeroMean};
use gp_workload::{acquire, enough, grid, memory, outcome, points, posteriors, rng};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[inline(never)]
fn measured_fit_hyper(xs: &[Vec<f64>], ys: &[f64]) -> Res<Gp> {
    Ok(Gp::fit(xs, ys, Arc::new(ZeroMean), &FitOptions::default())?)
}

#[inline(never)]
fn measured_fit(xs: &[Vec<f64>], ys: &[f64], hyper: &Hyperparameters) -> Res<Gp> {
    Ok(Gp::new(xs, ys, Arc::new(ZeroMean), hyper.clone())?)
}

#[inline(never)]
fn measured_predict(gp: &Gp, cands: &[Vec<f64>]) -> Res<()> {
    black_box(gp.predict_batch(cands)?);
    Ok(())
}

#[inline(never)]
fn measured_update(gp: &mut Gp, x: &[f64], y: f64) -> Res<()> {
    Ok(gp.add_observation(x, y)?)
}

#[inline(never)]
fn measured_decision(gps: &[Gp], cands: &[Vec<f64>], memory: &[f64]) -> Vec<usize> {
    let acquired = acquire(posteriors(gps, cands), memory, 0);
    black_box(enough(&acquired, memory));
    acquired.batch.iter().map(|c| c.index).collect()
}

/// The data of outcome `k` at size `n`, and its hyperparameters: loaded from `cache` if there,
/// else fitted and saved (hyperparameter fits are too slow to repeat under valgrind).
fn data(
    k: usize,
    n: usize,
    cache: Option<&str>,
) -> Res<(Vec<Vec<f64>>, Vec<f64>, Hyperparameters)> {
    let mut r = rng(42);
    let xs = points(n, &mut r);
    let mut r = rng(43 + k as u64);
    let ys: Vec<f64> = xs.iter().map(|x| outcome(k, x, &mut r)).collect();
    let path = cache.map(|c| format!("{c}.{k}"));
    if let Some(text) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
        return Ok((xs, ys, serde_json::from_str(&text)?));
    }
    let hyper = Gp::fit(&xs, &ys, Arc::new(ZeroMean), &FitOptions::default())?
        .hyperparameters()
        .clone();
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string(&hyper)?)?;
    }
    Ok((xs, ys, hyper))
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let (Some(op), Some(n)) = (args.first(), args.get(1)) else {
        eprintln!("usage: gp_callgrind fit-hyper|fit|predict|update|decision N [HYPER_CACHE]");
        return Ok(());
    };
    let n: usize = n.parse()?;
    let cache = args.get(2).map(String::as_str);
    let cands = grid();
    match op.as_str() {
        "fit-hyper" => {
            let (xs, ys, _) = data(0, n, None)?;
            black_box(measured_fit_hyper(&xs, &ys)?);
        }
        "fit" | "predict" | "update" => {
            let (xs, ys, hyper) = data(0, n, cache)?;
            if op == "fit" {
                black_box(measured_fit(&xs, &ys, &hyper)?);
                return Ok(());
            }
            // Not through `measured_fit`: nested measured calls would be counted too.
            let mut gp = Gp::new(&xs, &ys, Arc::new(ZeroMean), hyper)?;
            if op == "predict" {
                measured_predict(&gp, &cands)?;
            } else if op == "update" {
                measured_update(&mut gp, &cands[7], 1.0)?;
            }
        }
        "decision" => {
            let mut gps = Vec::new();
            for k in 0..4 {
                let (xs, ys, hyper) = data(k, n, cache)?;
                gps.push(Gp::new(&xs, &ys, Arc::new(ZeroMean), hyper)?);
            }
            println!(
                "picks {:?}",
                measured_decision(&gps, &cands, &memory(&cands))
            );
        }
        other => return Err(format!("unknown operation {other}").into()),
    }
    Ok(())
}

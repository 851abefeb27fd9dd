//! `demeter-coordinator model …`: fit the surrogates offline from an observations CSV and ask
//! them what they believe. Nothing here talks to Flink; it is the model, inspectable by hand.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

use demeter_coordinator::models::observations::{parse_csv, to_csv};
use demeter_coordinator::models::space::{JobConfig, SearchSpace};
use demeter_coordinator::models::surrogate::{
    ConfigPrediction, Estimate, PriorMean, Qos, Surrogate, SurrogateSnapshot, feasible_pareto,
    fit_options,
};
use demeter_coordinator::twin::truth::GroundTruth;
use rand::SeedableRng;
use rand::rngs::StdRng;

#[derive(Debug, Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    command: ModelCommand,
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Fit the surrogates to observations and print the fitted physics and GP hyperparameters.
    Fit {
        #[command(flatten)]
        source: Source,
        /// Write the fitted model (JSON) here; `predict`/`pareto --model` reuse it without refitting.
        #[arg(long)]
        save: Option<PathBuf>,
    },
    /// Predict every outcome of one configuration at one input rate.
    Predict {
        #[command(flatten)]
        source: Source,
        /// Configuration, e.g. "p=12,slots=2,mem=2048m,cpu=1.5,ckpt=30s".
        #[arg(long)]
        config: String,
        /// Input rate in events/s.
        #[arg(long)]
        rate: f64,
        #[command(flatten)]
        qos: QosArgs,
    },
    /// List the configurations predicted feasible at a rate that are Pareto-optimal in
    /// (total CPU, total memory), cheapest first.
    Pareto {
        #[command(flatten)]
        source: Source,
        /// Input rate in events/s.
        #[arg(long)]
        rate: f64,
        #[command(flatten)]
        qos: QosArgs,
        /// Minimum probability of meeting both QoS bounds for a configuration to count as feasible.
        #[arg(long, default_value_t = 0.9)]
        min_probability: f64,
    },
    /// Write observations of a simulated job (the twin's ground truth) as CSV to stdout:
    /// random configurations from the search space at random rates, with measurement noise.
    Simulate {
        /// Ground-truth TOML (e.g. coordinator/testdata/twin.toml).
        #[arg(long)]
        twin: PathBuf,
        /// Search space TOML to draw configurations from (default: the paper's grid).
        #[arg(long)]
        space: Option<PathBuf>,
        /// Number of observations.
        #[arg(long, default_value_t = 60)]
        n: usize,
        /// Lowest and highest rate drawn, events/s (default: 5 %–100 % of the space's max_rate).
        #[arg(long, num_args = 2, value_names = ["MIN", "MAX"])]
        rates: Option<Vec<f64>>,
        /// Seed of the configuration, rate and noise draws.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// Where the model comes from: observations to fit, or a model saved by `fit --save`.
#[derive(Debug, Args)]
struct Source {
    /// Observations CSV (schema: docs/observations.md).
    #[arg(long, required_unless_present = "model", conflicts_with = "model")]
    observations: Option<PathBuf>,
    /// A model saved by `model fit --save` (used instead of fitting).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Search space TOML (defaults: the Demeter paper's grid, 1,200 configurations).
    #[arg(long)]
    space: Option<PathBuf>,
    /// Prior mean of the GPs: physics-informed, or plain (black box) for comparison.
    #[arg(long, value_enum, default_value_t = PriorArg::Physics)]
    prior: PriorArg,
    /// Seed of the hyperparameter optimiser's random restarts.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PriorArg {
    Physics,
    Plain,
}

#[derive(Debug, Args)]
struct QosArgs {
    /// p95 latency bound in ms.
    #[arg(long, default_value_t = 500.0)]
    latency_ms: f64,
    /// Recovery-time bound in s (the paper's 180 s by default).
    #[arg(long, default_value_t = 180.0)]
    recovery_s: f64,
}

impl QosArgs {
    fn qos(&self) -> anyhow::Result<Qos> {
        if !(self.latency_ms > 0.0 && self.recovery_s > 0.0) {
            bail!("--latency-ms and --recovery-s must be positive");
        }
        Ok(Qos {
            latency_p95_ms: self.latency_ms,
            recovery_s: self.recovery_s,
        })
    }
}

pub fn run(args: ModelArgs) -> anyhow::Result<()> {
    match args.command {
        ModelCommand::Fit { source, save } => {
            let model = load(&source)?;
            print_fit(&model);
            if let Some(path) = save {
                let json = serde_json::to_string_pretty(&model.snapshot())?;
                std::fs::write(&path, json)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("saved model to {}", path.display());
            }
        }
        ModelCommand::Predict {
            source,
            config,
            rate,
            qos,
        } => {
            let model = load(&source)?;
            let config: JobConfig = config.parse()?;
            if let Some(why) = model.space().violation(&config) {
                println!("note: {config} is not deployable in this space: {why}");
            }
            print_prediction(&model.predict(&config, check_rate(rate)?)?, &qos.qos()?);
        }
        ModelCommand::Pareto {
            source,
            rate,
            qos,
            min_probability,
        } => {
            let model = load(&source)?;
            let qos = qos.qos()?;
            let candidates = model.space().candidates();
            let predictions = model.predict_many(&candidates, check_rate(rate)?)?;
            print_pareto(&predictions, &qos, min_probability, rate);
        }
        ModelCommand::Simulate {
            twin,
            space,
            n,
            rates,
            seed,
        } => {
            let truth = GroundTruth::from_toml(&read(&twin)?)?;
            let space = load_space(space.as_deref())?;
            let rates = match rates.as_deref() {
                Some(&[lo, hi]) if lo >= 0.0 && lo <= hi => (lo, hi),
                Some(_) => bail!("--rates MIN MAX needs 0 ≤ MIN ≤ MAX"),
                None => (0.05 * space.max_rate, space.max_rate),
            };
            let mut rng = StdRng::seed_from_u64(seed);
            let observations = truth.sample(&space.candidates(), rates, n, &mut rng);
            print!("{}", to_csv(&observations)?);
        }
    }
    Ok(())
}

fn check_rate(rate: f64) -> anyhow::Result<f64> {
    if !(rate.is_finite() && rate >= 0.0) {
        bail!("--rate must be a non-negative number of events/s");
    }
    Ok(rate)
}

fn load(source: &Source) -> anyhow::Result<Surrogate> {
    if let Some(path) = &source.model {
        let snapshot: SurrogateSnapshot = serde_json::from_str(&read(path)?)
            .with_context(|| format!("{} is not a saved model", path.display()))?;
        return Ok(Surrogate::from_snapshot(&snapshot)?);
    }
    let Some(path) = &source.observations else {
        bail!("give --observations or --model");
    };
    let observations = parse_csv(&read(path)?, &path.display().to_string())?;
    let space = load_space(source.space.as_deref())?;
    let prior = match source.prior {
        PriorArg::Physics => PriorMean::Physics,
        PriorArg::Plain => PriorMean::Plain,
    };
    let options = fit_options(source.seed);
    tracing::info!(
        observations = observations.len(),
        ?prior,
        "fitting surrogates"
    );
    Ok(Surrogate::fit(&space, &observations, prior, &options)?)
}

fn load_space(path: Option<&Path>) -> anyhow::Result<SearchSpace> {
    Ok(match path {
        Some(path) => SearchSpace::from_toml(&read(path)?)?,
        None => SearchSpace::default(),
    })
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn print_fit(model: &Surrogate) {
    let p = model.physics();
    let c = &p.log_capacity;
    println!(
        "{} observations, prior {:?}",
        model.observations().len(),
        model.prior()
    );
    println!(
        "capacity  ≈ {:.0}/s · p^{:.2} · (cpu/slot)^{:.2} · (mem/slot GB)^{:.2} · e^({:.2}·10s/interval)",
        c[0].exp(),
        c[1],
        c[2],
        c[3],
        c[4]
    );
    println!(
        "latency   ≈ {:.0} ms · (1 + {:.3}·ρ/(1−ρ)) + {:.0} s·(ρ−1)⁺",
        p.latency_base_ms, p.latency_queue_k, p.latency_window_s
    );
    println!(
        "recovery  ≈ {:.1} s + {:.2} · rate·({:.1} s + interval/2) / (capacity − rate)",
        p.restart_s, p.drain_factor, p.restart_s
    );
    let snapshot = model.snapshot();
    for (name, hyper) in ["capacity", "latency", "recovery"]
        .iter()
        .zip(&snapshot.hyperparameters)
    {
        match hyper {
            Some(h) => {
                let ls: Vec<String> = h.lengthscales.iter().map(|l| format!("{l:.2}")).collect();
                println!(
                    "GP {name:<9} lengthscales [p, slots, mem/slot, cpu/slot, ckpt, rate] = [{}], signal sd {:.3}, noise sd {:.3}",
                    ls.join(", "),
                    h.signal_variance.sqrt(),
                    h.noise_variance.sqrt()
                );
            }
            None => println!("GP {name:<9} not fitted (too few observations): prior only"),
        }
    }
}

fn interval(e: &Estimate) -> String {
    format!(
        "{:.0} (±1σ: {:.0} – {:.0})",
        e.median(),
        e.at_sigma(-1.0),
        e.at_sigma(1.0)
    )
}

fn print_prediction(p: &ConfigPrediction, qos: &Qos) {
    println!("{} at {:.0} events/s", p.config, p.rate);
    println!("  capacity       {} events/s", interval(&p.capacity));
    println!("  utilisation    {:.2}", p.rate / p.capacity.median());
    println!("  p95 latency    {} ms", interval(&p.latency_p95_ms));
    println!("  recovery time  {} s", interval(&p.recovery_s));
    println!(
        "  P(latency ≤ {} ms) = {:.3}, P(recovery ≤ {} s) = {:.3}, P(feasible) = {:.3}",
        qos.latency_p95_ms,
        p.latency_p95_ms.prob_at_most(qos.latency_p95_ms),
        qos.recovery_s,
        p.recovery_s.prob_at_most(qos.recovery_s),
        p.p_feasible(qos)
    );
    println!(
        "  cost           {} TaskManagers, {} cores, {} MB",
        p.config.task_managers(),
        p.total_cpu_cores(),
        p.total_memory_mb()
    );
}

fn print_pareto(predictions: &[ConfigPrediction], qos: &Qos, min_probability: f64, rate: f64) {
    let front = feasible_pareto(predictions, qos, min_probability);
    let feasible = predictions
        .iter()
        .filter(|p| p.p_feasible(qos) >= min_probability)
        .count();
    println!(
        "{feasible} of {} configurations have P(latency ≤ {} ms and recovery ≤ {} s) ≥ {min_probability} at {rate:.0} events/s",
        predictions.len(),
        qos.latency_p95_ms,
        qos.recovery_s
    );
    if front.is_empty() {
        println!("none is predicted feasible: the safe default is the fallback");
        return;
    }
    println!(
        "{:<42} {:>6} {:>8} {:>7} {:>10} {:>10} {:>8}",
        "configuration", "cores", "MB", "P(ok)", "latency", "recovery", "ρ"
    );
    for p in front {
        println!(
            "{:<42} {:>6} {:>8} {:>7.3} {:>8.0}ms {:>9.0}s {:>8.2}",
            p.config.to_string(),
            p.total_cpu_cores(),
            p.total_memory_mb(),
            p.p_feasible(qos),
            p.latency_p95_ms.median(),
            p.recovery_s.median(),
            p.rate / p.capacity.median()
        );
    }
}

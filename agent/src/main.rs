//! `demeter-agent`: the binary edge. Loads the config, samples on a timer into the outbox, and
//! keeps the connection to the coordinator running until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use demeter_agent::backoff::Backoff;
use demeter_agent::client::{self, ClientConfig, Shared};
use demeter_agent::collectors::Sampler;
use demeter_agent::config::AgentConfig;
use demeter_agent::outbox::Outbox;
use demeter_agent::supervisor;
use demeter_common::{service, tls};
use tracing::{info, warn};

#[derive(Debug, Parser)]
#[command(
    name = "demeter-agent",
    version,
    about = "Demeter node agent: samples the host and its Flink TaskManager JVMs and reports to the coordinator",
    long_about = "Demeter node agent. Samples host CPU/memory/load and every Flink TaskManager JVM on \
                  this node (CPU, RSS, heap and GC from hsperfdata), buffers the samples while the \
                  coordinator is unreachable, and streams them over QUIC with mutual TLS. Answers \
                  the coordinator's orders."
)]
struct Args {
    /// Configuration file (TOML); see agent.example.toml.
    #[arg(long, short)]
    config: PathBuf,
    /// Override `coordinator`: the coordinator's QUIC address.
    #[arg(long)]
    coordinator: Option<String>,
    /// Override `sampling.interval_ms`.
    #[arg(long)]
    interval_ms: Option<u64>,
    /// Override `log`: the log filter.
    #[arg(long)]
    log: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config: AgentConfig = demeter_common::config::load_toml(&args.config)?;
    if let Some(addr) = args.coordinator {
        config.coordinator = addr;
    }
    if let Some(ms) = args.interval_ms {
        config.sampling.interval_ms = ms;
    }
    if let Some(log) = args.log {
        config.log = log;
    }
    service::init_logging(&config.log)?;
    // One thread: the agent's work is a timer and one connection; a thread pool would only cost
    // memory on every node.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(run(config))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

async fn run(config: AgentConfig) -> anyhow::Result<()> {
    let identity = tls::NodeIdentity::load(&config.tls).context("loading TLS material")?;
    let mut endpoint = quinn::Endpoint::client(SocketAddr::from(([0, 0, 0, 0], 0)))
        .context("opening a UDP socket")?;
    endpoint.set_default_client_config(tls::client_config(&identity)?);
    let mut sampler = Sampler::new(config.collectors.clone()).context("starting the collectors")?;

    let sampling = &config.sampling;
    let boot_id = rand::random::<u64>();
    let supervisor = config.supervisor.as_ref().map(supervisor::from_config);
    // A started TaskManager is sampled at the next tick, not after the discovery interval.
    let mut spawned = supervisor.as_ref().map(|s| s.subscribe_spawned());
    let shared = Shared::with_supervisor(
        Outbox::new(boot_id, sampling.batch_size, sampling.buffer_samples),
        1024,
        supervisor.clone(),
    );
    let client_config = ClientConfig {
        coordinator: config.coordinator.clone(),
        server_name: config.server_name.clone(),
        backoff: Backoff {
            initial: Duration::from_millis(sampling.reconnect_initial_ms),
            max: Duration::from_millis(sampling.reconnect_max_ms),
        },
    };
    let connection = tokio::spawn(client::run(endpoint.clone(), client_config, shared.clone()));
    info!(coordinator = %config.coordinator, boot_id, interval_ms = sampling.interval_ms, "agent started");
    service::notify_ready("sampling");

    let mut tick = tokio::time::interval(Duration::from_millis(sampling.interval_ms.max(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut watchdog = service::watchdog_interval().map(tokio::time::interval);
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = tick.tick() => take_sample(&mut sampler, &shared),
            Some(_) = async { match watchdog.as_mut() { Some(w) => Some(w.tick().await), None => None } } => {
                service::notify_watchdog();
            }
            Some(Ok(())) = async { match spawned.as_mut() { Some(s) => Some(s.changed().await), None => None } } => {
                sampler.rediscover_next_sample();
            }
            r = &mut shutdown => { r?; break; }
        }
    }

    service::notify_stopping();
    if let Some(supervisor) = &supervisor {
        supervisor.shutdown().await;
    }
    seal(&shared);
    let drained = client::drain(&shared, Duration::from_millis(sampling.shutdown_grace_ms)).await;
    connection.abort();
    endpoint.close(
        demeter_common::protocol::close_code::NORMAL.into(),
        b"agent stopping",
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    let (taken, acked, dropped, pending) = shared
        .outbox
        .lock()
        .map(|o| {
            (
                o.taken(),
                o.acked_up_to(),
                o.dropped_total(),
                o.pending_samples(),
            )
        })
        .unwrap_or_default();
    info!(
        samples_taken = taken,
        samples_acked = acked,
        samples_dropped = dropped,
        samples_unsent = pending,
        drained,
        "agent stopped"
    );
    Ok(())
}

fn take_sample(sampler: &mut Sampler, shared: &Shared) {
    let sample = sampler.sample(now_ms());
    let Ok(mut outbox) = shared.outbox.lock() else {
        return;
    };
    if let Some(dropped) = outbox.push(sample) {
        warn!(
            count = dropped.count(),
            first_seq = dropped.first_seq,
            last_seq = dropped.last_seq,
            oldest_taken_at_ms = dropped.oldest_taken_at_ms,
            newest_taken_at_ms = dropped.newest_taken_at_ms,
            total_dropped = outbox.dropped_total(),
            "buffer full: dropped the oldest unsent samples"
        );
    }
    let sealed = outbox.sealed_up_to();
    drop(outbox);
    shared.sealed.send_replace(sealed);
}

fn seal(shared: &Shared) {
    if let Ok(mut outbox) = shared.outbox.lock() {
        outbox.seal();
        let sealed = outbox.sealed_up_to();
        drop(outbox);
        shared.sealed.send_replace(sealed);
    }
}

async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
    }
    Ok(())
}

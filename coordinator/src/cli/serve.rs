//! `demeter-coordinator run`: the coordinator daemon.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use demeter_common::{service, tls};
use demeter_coordinator::config::CoordinatorConfig;
use demeter_coordinator::ingest::Ingest;
use demeter_coordinator::store::Store;
use tracing::{info, warn};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Configuration file (TOML); see coordinator.example.toml.
    #[arg(long, short)]
    config: PathBuf,
    /// Override `listen`: the UDP address for QUIC.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Override `store`: the redb file.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Override `log`: the log filter.
    #[arg(long)]
    log: Option<String>,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut config: CoordinatorConfig = demeter_common::config::load_toml(&args.config)?;
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(store) = args.store {
        config.store = store;
    }
    if let Some(log) = args.log {
        config.log = log;
    }
    service::init_logging(&config.log)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(serve(config))
}

async fn serve(config: CoordinatorConfig) -> anyhow::Result<()> {
    let identity = tls::NodeIdentity::load(&config.tls).context("loading TLS material")?;
    let server = tls::server_config(&identity)?;
    let store = Arc::new(
        Store::open(&config.store)
            .with_context(|| format!("opening the store {}", config.store.display()))?,
    );
    let udp = demeter_common::udp::bind_udp(config.listen, config.ingest.udp_receive_buffer_bytes)
        .with_context(|| format!("listening on {}", config.listen))?;
    // Linux reports twice the usable size, and grants at most net.core.rmem_max.
    if udp.receive_buffer / 2 < config.ingest.udp_receive_buffer_bytes {
        warn!(
            asked = config.ingest.udp_receive_buffer_bytes,
            granted = udp.receive_buffer / 2,
            "UDP receive buffer capped by net.core.rmem_max; raise it for many agents"
        );
    }
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        udp.socket,
        Arc::new(quinn::TokioRuntime),
    )
    .with_context(|| format!("listening on {}", config.listen))?;
    let ingest = Ingest::start(endpoint, store, config.ingest.clone());
    let addr = ingest.local_addr()?;
    info!(%addr, store = %config.store.display(), "coordinator listening");
    service::notify_ready(&format!("listening on {addr}"));
    if let Some(interval) = service::watchdog_interval() {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            loop {
                tick.tick().await;
                service::notify_watchdog();
            }
        });
    }
    shutdown_signal().await?;
    service::notify_stopping();
    info!("shutting down");
    ingest.shutdown().await;
    Ok(())
}

/// SIGTERM (systemd) or SIGINT (a terminal).
pub async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
    }
    Ok(())
}

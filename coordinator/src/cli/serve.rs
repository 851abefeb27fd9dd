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
        tls::server_endpoint_config(&identity),
        Some(server),
        udp.socket,
        Arc::new(quinn::TokioRuntime),
    )
    .with_context(|| format!("listening on {}", config.listen))?;
    let ingest = Ingest::start(endpoint, store.clone(), config.ingest.clone());
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
    start_executor(&config, &store, ingest.handle())?;
    shutdown_signal().await?;
    service::notify_stopping();
    info!("shutting down");
    ingest.shutdown().await;
    Ok(())
}

/// The executor: CLI job requests, operations with agent-run TaskManagers, the resumption of
/// what a previous daemon left in flight (once its agents are back) and the job watchdog.
fn start_executor(
    config: &CoordinatorConfig,
    store: &Arc<Store>,
    ingest: demeter_coordinator::ingest::IngestHandle,
) -> anyhow::Result<()> {
    use demeter_coordinator::executor::journal::Journal;
    use demeter_coordinator::executor::service::{ExecutorService, Settings};
    use demeter_coordinator::flink::{ClientConfig, FlinkClient};
    let journal = Journal::open(store.clone()).context("opening the executor journal")?;
    let client = FlinkClient::new(&config.flink.rest_url, ClientConfig::default())
        .with_context(|| format!("Flink REST client for {}", config.flink.rest_url))?;
    let executor = &config.executor;
    let settings = Settings {
        cluster: executor.cluster.clone().unwrap_or_else(|| "default".into()),
        agents: executor.agents.clone(),
        resume_wait: std::time::Duration::from_secs(executor.resume_wait_secs),
        watchdog: executor.watchdog.clone(),
    };
    let client = Arc::new(client);
    tokio::spawn(check_flink_config(
        client.clone(),
        config.flink.rest_url.clone(),
    ));
    let failpoint = Arc::new(super::failpoint::Failpoint::from_env());
    let service = ExecutorService::start(ingest, client, journal, settings, failpoint)?;
    start_tuners(config, store, &service)
}

/// Warns once about Flink settings that would keep Demeter's readings stale (see
/// [`demeter_coordinator::flink::ClusterConfig::findings`]). Flink may start after the daemon,
/// so this asks again every minute until the JobManager answers.
async fn check_flink_config(
    client: Arc<demeter_coordinator::flink::FlinkClient>,
    rest_url: String,
) {
    const RETRY: std::time::Duration = std::time::Duration::from_secs(60);
    loop {
        match client.jobmanager_config().await {
            Ok(config) => {
                let findings = config.findings();
                for f in &findings {
                    warn!(flink = %rest_url, key = f.key, value = f.value.as_deref().unwrap_or("(Flink's default)"), advice = %f.advice, "Flink setting to change");
                }
                if findings.is_empty() {
                    info!(flink = %rest_url, "Flink configuration checked: nothing to change");
                }
                return;
            }
            Err(e) => {
                info!(flink = %rest_url, error = %e, retry_s = RETRY.as_secs(), "cannot read the JobManager's configuration yet");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// One live loop per `[[tuning.jobs]]` entry.
fn start_tuners(
    config: &CoordinatorConfig,
    store: &Arc<Store>,
    service: &Arc<demeter_coordinator::executor::service::ExecutorService>,
) -> anyhow::Result<()> {
    use demeter_coordinator::tuner::{Board, DecisionLog, Tuner};
    let log = DecisionLog::open(store.clone()).context("opening the decision log")?;
    let board = Arc::new(Board::new(log));
    service.serve_tuning(board.clone());
    for tuning in &config.tuning.jobs {
        tuning.validate()?;
        info!(job = %tuning.job, policy = %tuning.policy, "job will be tuned");
        tokio::spawn(Tuner::new(tuning.clone(), service.clone(), board.clone()).run());
    }
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

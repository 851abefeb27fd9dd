//! `demeter-coordinator agents`: the fleet as the running coordinator sees it, asked over QUIC
//! with a `cli` certificate.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use demeter_common::protocol::{
    AgentMessage, AgentSummary, Capability, CoordinatorMessage, FleetQuery, MAX_FLEET_PAGE,
};
use demeter_common::tls::TlsPaths;

use super::remote::Session;

#[derive(Debug, Args)]
pub struct AgentsArgs {
    /// The coordinator's QUIC address.
    #[arg(long, default_value = "127.0.0.1:7443")]
    addr: SocketAddr,
    /// The name in the coordinator's certificate.
    #[arg(long, default_value = "coordinator")]
    server_name: String,
    /// The cluster CA certificate.
    #[arg(long)]
    ca: PathBuf,
    /// A certificate with role `cli` (`certs issue --role cli`).
    #[arg(long)]
    cert: PathBuf,
    /// Its private key.
    #[arg(long)]
    key: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: AgentsArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(query(args))
}

async fn query(args: AgentsArgs) -> anyhow::Result<()> {
    let tls = TlsPaths {
        ca: args.ca,
        cert: args.cert,
        key: args.key,
    };
    let mut session = Session::connect(
        args.addr,
        &args.server_name,
        tls,
        vec![Capability::FleetQuery],
    )
    .await?;
    let mut fleet = Vec::new();
    loop {
        let query = FleetQuery {
            after: fleet.last().map(|a: &AgentSummary| a.name.clone()),
            limit: MAX_FLEET_PAGE,
        };
        session.send(&AgentMessage::FleetQuery(query)).await?;
        let page = match session.next().await? {
            CoordinatorMessage::Fleet(page) => page,
            other => bail!("unexpected answer: {other:?}"),
        };
        let last_page = page.len() < MAX_FLEET_PAGE as usize;
        fleet.extend(page);
        if last_page {
            break;
        }
    }
    session.close().await;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&fleet)?);
    } else {
        println!(
            "{:<20} {:<22} {:>8} {:>6} {:>10} {:>6}  taskmanagers",
            "agent", "address", "stored", "cpu%", "mem used", "load"
        );
        for agent in &fleet {
            let (cpu, mem, load, tms) = agent.last_sample.as_ref().map_or(
                (
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    String::new(),
                ),
                |s| {
                    let tms: Vec<String> = s
                        .jvms
                        .iter()
                        .map(|j| {
                            format!(
                                "pid {} {:.2} cores {} MiB",
                                j.pid,
                                j.cpu_cores,
                                j.rss_bytes >> 20
                            )
                        })
                        .collect();
                    (
                        format!("{:.1}", s.host.cpu_busy * 100.0),
                        format!("{} MiB", s.host.mem_used_bytes >> 20),
                        format!("{:.2}", s.host.load_1m),
                        tms.join("; "),
                    )
                },
            );
            println!(
                "{:<20} {:<22} {:>8} {:>6} {:>10} {:>6}  {}",
                agent.name, agent.remote_addr, agent.stored_up_to, cpu, mem, load, tms
            );
        }
        println!("{} agent(s) connected", fleet.len());
    }
    Ok(())
}

//! Foundation benchmarks, printed as a table (run after `cargo build --release --workspace --bins`):
//! 1. order round trip coordinator → agent → coordinator on loopback (in-process);
//! 2. coordinator ingest with N simulated agents at 1 Hz in one process, against the real
//!    coordinator binary, whose CPU is read from /proc;
//! 3. the real agent binary at 1 Hz: RSS and CPU share.
//!
//! `DEMETER_BENCH_QUICK=1` shortens every phase; `DEMETER_BENCH_AGENTS=N` sets N (default 5000);
//! `DEMETER_BENCH_ONLY=rtt,agent,ingest` runs only those parts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use demeter_agent::backoff::Backoff;
use demeter_agent::client::{self, ClientConfig, Shared};
use demeter_agent::outbox::Outbox;
use demeter_common::metrics::{HeapSample, HostSample, JvmSample, Sample};
use demeter_common::protocol::{AgentMessage, CoordinatorMessage, MetricBatch, OrderKind, Role};
use demeter_common::{tls, transport};
use demeter_coordinator::ingest::{Ingest, IngestConfig};
use demeter_coordinator::store::Store;
use demeter_tests::process::{start_agent, start_coordinator};
use demeter_tests::{Pki, Scratch, free_udp_port, loopback, peers};

fn quick() -> bool {
    std::env::var_os("DEMETER_BENCH_QUICK").is_some()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn realistic_sample(t: u64) -> Sample {
    let heap = HeapSample {
        young_used_bytes: 1 << 26,
        old_used_bytes: 1 << 27,
        young_gc_count: 40,
        ..Default::default()
    };
    let jvm = |pid| JvmSample {
        pid,
        taskmanager_id: Some(format!("tm-{pid}")),
        cpu_cores: 0.7,
        rss_bytes: 400 << 20,
        heap: Some(heap.clone()),
    };
    Sample {
        taken_at_ms: t,
        host: HostSample {
            cpu_count: 16,
            cpu_busy: 0.4,
            mem_total_bytes: 64 << 30,
            mem_used_bytes: 20 << 30,
            ..Default::default()
        },
        jvms: vec![jvm(100), jvm(200)],
    }
}

fn order_round_trip(rt: &tokio::runtime::Runtime) {
    let scratch = Scratch::new("bench-orders");
    let pki = Pki::new(&scratch.path.join("pki"));
    pki.issue("agent-0", Role::Agent);
    let n = if quick() { 200 } else { 2000 };
    let latencies = rt.block_on(async {
        let store = Arc::new(Store::open(&scratch.path.join("store.redb")).unwrap());
        let server = tls::server_config(&pki.identity("coordinator")).unwrap();
        let endpoint = quinn::Endpoint::server(server, loopback(0)).unwrap();
        let ingest = Ingest::start(endpoint, store, IngestConfig::default());
        let addr = ingest.local_addr().unwrap();
        let shared = Shared::new(Outbox::new(1, 5, 100), 1024);
        let config = ClientConfig {
            coordinator: addr.to_string(),
            server_name: "coordinator".into(),
            backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(500),
            },
        };
        let agent = tokio::spawn(client::run(
            peers::endpoint_for(&pki.identity("agent-0")),
            config,
            shared,
        ));
        let handle = ingest.handle();
        while handle.connected_agents().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut latencies = Vec::with_capacity(n);
        for _ in 0..n {
            let start = Instant::now();
            handle
                .send_order("agent-0", OrderKind::Ping, Duration::from_secs(5))
                .await
                .unwrap();
            latencies.push(start.elapsed().as_secs_f64() * 1e6);
        }
        agent.abort();
        ingest.shutdown().await;
        latencies
    });
    let mut sorted = latencies;
    sorted.sort_by(f64::total_cmp);
    println!(
        "| order round trip (loopback, {n} pings) | p50 {:.0} µs | p99 {:.0} µs | max {:.0} µs |",
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        sorted[sorted.len() - 1]
    );
}

/// One simulated agent: hello, then one single-sample batch per second; counts the samples the
/// coordinator acknowledged as stored.
async fn simulated_agent(
    endpoint: quinn::Endpoint,
    identity: tls::NodeIdentity,
    addr: std::net::SocketAddr,
    run_for: Duration,
    stored: Arc<AtomicU64>,
) -> Result<(), String> {
    let mut session = peers::hello_as(&endpoint, &identity, addr).await?;
    let mut uni = session
        .connection
        .open_uni()
        .await
        .map_err(|e| format!("open stream: {e}"))?;
    transport::write_preamble(&mut uni)
        .await
        .map_err(|e| format!("preamble: {e}"))?;
    let acks = tokio::spawn(async move {
        let mut last = 0;
        while let Ok(Some(CoordinatorMessage::Ack { stored_up_to, .. })) =
            transport::read_frame::<CoordinatorMessage>(&mut session.control_recv).await
        {
            stored.fetch_add(stored_up_to - last, Ordering::Relaxed);
            last = stored_up_to;
        }
    });
    let start = Instant::now();
    let mut seq = 1;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while start.elapsed() < run_for {
        tick.tick().await;
        let batch = MetricBatch {
            boot_id: 1,
            first_seq: seq,
            samples: vec![realistic_sample(seq)],
        };
        if let Err(e) = transport::write_frame(&mut uni, &AgentMessage::Metrics(batch)).await {
            acks.abort();
            return Err(format!("send: {e}"));
        }
        seq += 1;
    }
    session.connection.close(0u32.into(), b"done");
    acks.abort();
    Ok(())
}

const SIMULATED_AGENT_SOCKETS: usize = 16;

/// A client endpoint for a few hundred simulated agents, with a receive buffer as large as the
/// coordinator's so that the simulation, not the coordinator, never drops datagrams.
fn shared_client_endpoint() -> quinn::Endpoint {
    let udp = demeter_common::udp::bind_udp(loopback(0), 8 << 20).unwrap();
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        udp.socket,
        Arc::new(quinn::TokioRuntime),
    )
    .unwrap()
}

fn ingest_at_scale(rt: &tokio::runtime::Runtime) {
    let agents: usize = std::env::var("DEMETER_BENCH_AGENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick() { 500 } else { 5000 });
    let measure = if quick() {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(30)
    };
    let scratch = Scratch::new("bench-ingest");
    let pki = Pki::new(&scratch.path.join("pki"));
    pki.issue("cli", Role::Cli);
    let ca = pki.ca();
    let now = time::OffsetDateTime::now_utc();
    let identities: Vec<_> = (0..agents)
        .map(|i| {
            let pair = tls::issue_cert(
                &ca,
                &format!("sim-{i}"),
                Role::Agent,
                now - time::Duration::hours(1),
                now + time::Duration::days(1),
            )
            .unwrap();
            tls::NodeIdentity::from_pem(&ca.cert_pem, &pair).unwrap()
        })
        .collect();
    let port = free_udp_port();
    let coordinator = start_coordinator(&scratch.path, &pki, port);
    let addr = loopback(port);
    let sent = Arc::new(AtomicU64::new(0));
    let ramp = Duration::from_secs((agents as u64 / 250).max(2));
    let total = ramp + measure + Duration::from_secs(2);
    let connect_start = Instant::now();
    let (cpu_used, stored, connected) = rt.block_on(async {
        let mut tasks = Vec::new();
        // Agents share a few UDP sockets (client endpoints), as behind NATs: thousands of
        // sockets, each with its own driver task, would starve the simulating process before
        // the coordinator it measures.
        let endpoints: Vec<quinn::Endpoint> = (0..SIMULATED_AGENT_SOCKETS)
            .map(|_| shared_client_endpoint())
            .collect();
        for (i, identity) in identities.into_iter().enumerate() {
            tasks.push(tokio::spawn(simulated_agent(
                endpoints[i % endpoints.len()].clone(),
                identity,
                addr,
                total,
                sent.clone(),
            )));
            if i % 50 == 49 {
                tokio::time::sleep(ramp / (agents as u32 / 50).max(1)).await;
            }
        }
        tokio::time::sleep(ramp.saturating_sub(connect_start.elapsed()) + Duration::from_secs(2))
            .await;
        let sent_before = sent.load(Ordering::Relaxed);
        let cpu_before = cpu_seconds(coordinator.pid());
        tokio::time::sleep(measure).await;
        let cpu_used = cpu_seconds(coordinator.pid()) - cpu_before;
        let stored = sent.load(Ordering::Relaxed) - sent_before;
        let connected = tokio::task::block_in_place(|| peers::fleet(&pki, addr).len());
        // A bench that silently loses agents measures less than it claims: say why each failed.
        let mut failures: std::collections::BTreeMap<String, usize> = Default::default();
        for t in tasks {
            if let Ok(Err(why)) = t.await {
                *failures.entry(why).or_default() += 1;
            }
        }
        for (why, count) in &failures {
            eprintln!("{count} simulated agents failed: {why}");
        }
        (cpu_used, stored, connected)
    });
    println!(
        "| coordinator ingest, {agents} agents × 1 Hz | {:.1} samples/s stored | coordinator CPU {:.2} cores | RSS {} MiB | {connected} agents connected |",
        stored as f64 / measure.as_secs_f64(),
        cpu_used / measure.as_secs_f64(),
        coordinator.rss_kib() / 1024,
    );
}

fn agent_footprint() {
    let run_for = if quick() {
        Duration::from_secs(15)
    } else {
        Duration::from_secs(60)
    };
    let scratch = Scratch::new("bench-agent");
    let pki = Pki::new(&scratch.path.join("pki"));
    pki.issue("node-1", Role::Agent);
    let port = free_udp_port();
    let _coordinator = start_coordinator(&scratch.path, &pki, port);
    let agent = start_agent(&scratch.path, &pki, "node-1", port, 1000);
    agent.wait_for_log("connected to coordinator", 1, Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(3));
    let cpu_before = cpu_seconds(agent.pid());
    let mut max_rss = 0;
    let start = Instant::now();
    while start.elapsed() < run_for {
        std::thread::sleep(Duration::from_secs(1));
        max_rss = max_rss.max(agent.rss_kib());
    }
    let cpu = cpu_seconds(agent.pid()) - cpu_before;
    let tms = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains("TaskManagerRunner"))
        .count();
    println!(
        "| agent at 1 Hz ({tms} TaskManager JVMs on the host), {}s | max RSS {:.1} MiB | CPU {:.3} % of one core |",
        run_for.as_secs(),
        max_rss as f64 / 1024.0,
        cpu / run_for.as_secs_f64() * 100.0
    );
}

fn main() {
    // `cargo bench` passes --bench; nothing to parse.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let _inside = rt.enter();
    let only = std::env::var("DEMETER_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only.split(',').any(|n| n == name);
    println!("| benchmark | figures |||\n|---|---|---|---|");
    if wanted("rtt") {
        order_round_trip(&rt);
    }
    if wanted("agent") {
        agent_footprint();
    }
    if wanted("ingest") {
        ingest_at_scale(&rt);
    }
}

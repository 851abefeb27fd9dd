//! Peers that must be refused, and valid peers that misbehave: each is turned away with a clear
//! reason while a well-behaved agent keeps reporting and the coordinator stays up and small.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use demeter_common::codec;
use demeter_common::protocol::{
    AgentMessage, Capability, Hello, PROTOCOL_VERSION, Role, close_code,
};
use demeter_common::tls::{self, NodeIdentity};
use demeter_common::transport;
use demeter_tests::process::{start_agent, start_coordinator};
use demeter_tests::{Pki, Scratch, free_udp_port, loopback, peers};
use time::{Duration as TimeDuration, OffsetDateTime};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn refused_and_misbehaving_peers_do_not_disturb_the_fleet() {
    let scratch = Scratch::new("refused");
    let pki = Pki::new(&scratch.path.join("pki"));
    pki.issue("cli", Role::Cli);
    pki.issue("good", Role::Agent);
    pki.issue("rogue", Role::Agent);
    let port = free_udp_port();
    let addr = loopback(port);
    let mut coordinator = start_coordinator(&scratch.path, &pki, port);
    let mut good = start_agent(&scratch.path, &pki, "good", port, 100);
    coordinator.wait_for_log("agent connected", 1, Duration::from_secs(20));
    let rss_before = coordinator.rss_kib();
    let rt = runtime();
    let _inside = rt.enter();

    // 1. No client certificate.
    let err = rt
        .block_on(peers::hello(
            &peers::endpoint_without_certificate(&pki),
            addr,
        ))
        .unwrap_err();
    assert!(!err.is_empty());
    coordinator.wait_for_log("refused connection", 1, Duration::from_secs(10));

    // 2. A certificate from another CA.
    let now = OffsetDateTime::now_utc();
    let other_ca = tls::generate_ca(
        "other",
        now - TimeDuration::hours(1),
        now + TimeDuration::days(1),
    )
    .unwrap();
    let impostor = tls::issue_cert(
        &other_ca,
        "good",
        Role::Agent,
        now - TimeDuration::hours(1),
        now + TimeDuration::days(1),
    )
    .unwrap();
    let identity = NodeIdentity::from_pem(&pki.ca().cert_pem, &impostor).unwrap();
    let err = rt
        .block_on(peers::hello(&peers::endpoint_for(&identity), addr))
        .unwrap_err();
    assert!(!err.is_empty());
    coordinator.wait_for_log("refused connection", 2, Duration::from_secs(10));

    // 3. An expired certificate from the right CA.
    let expired = tls::issue_cert(
        &pki.ca(),
        "stale",
        Role::Agent,
        now - TimeDuration::days(30),
        now - TimeDuration::days(1),
    )
    .unwrap();
    let identity = NodeIdentity::from_pem(&pki.ca().cert_pem, &expired).unwrap();
    let err = rt
        .block_on(peers::hello(&peers::endpoint_for(&identity), addr))
        .unwrap_err();
    assert!(!err.is_empty());
    coordinator.wait_for_log("refused connection", 3, Duration::from_secs(10));
    let log = coordinator.log_text();
    assert!(
        log.contains("Expired") || log.contains("expired"),
        "the log should say why: {log}"
    );

    let rogue = peers::endpoint_for(&pki.identity("rogue"));

    // 4. Garbage instead of a preamble.
    let (code, reason) = rt.block_on(async {
        let conn = rogue.connect(addr, "coordinator").unwrap().await.unwrap();
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        send.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        peers::close_reason(&conn).await
    });
    assert_eq!(code, u64::from(close_code::PROTOCOL_VIOLATION));
    assert!(reason.contains("not a Demeter stream"), "{reason}");

    // 5. A wrong protocol version.
    let (code, reason) = rt.block_on(async {
        let conn = rogue.connect(addr, "coordinator").unwrap().await.unwrap();
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        let mut preamble = codec::preamble();
        preamble[4..].copy_from_slice(&(PROTOCOL_VERSION + 98).to_be_bytes());
        send.write_all(&preamble).await.unwrap();
        peers::close_reason(&conn).await
    });
    assert_eq!(code, u64::from(close_code::UNSUPPORTED_VERSION));
    assert!(
        reason.contains(&format!(
            "unsupported protocol version {}",
            PROTOCOL_VERSION + 98
        )),
        "{reason}"
    );

    // 6. A valid hello, then a metrics frame that claims 4 GiB, repeated: refused each time
    //    before anything of that size is allocated.
    for _ in 0..20 {
        let (code, reason) = rt.block_on(async {
            let session = peers::hello(&rogue, addr).await.unwrap();
            let conn = session.connection.clone();
            let mut uni = conn.open_uni().await.unwrap();
            transport::write_preamble(&mut uni).await.unwrap();
            uni.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
            uni.write_all(&[0u8; 64]).await.unwrap();
            peers::close_reason(&conn).await
        });
        assert_eq!(code, u64::from(close_code::PROTOCOL_VIOLATION));
        assert!(reason.contains("exceeds the limit"), "{reason}");
    }

    // 7. A valid frame of the wrong kind on the metrics stream.
    let (code, reason) = rt.block_on(async {
        let session = peers::hello(&rogue, addr).await.unwrap();
        let conn = session.connection.clone();
        let mut uni = conn.open_uni().await.unwrap();
        transport::write_preamble(&mut uni).await.unwrap();
        let hello = Hello {
            boot_id: 1,
            software: "x".into(),
            capabilities: vec![Capability::Metrics],
        };
        transport::write_frame(&mut uni, &AgentMessage::Hello(hello))
            .await
            .unwrap();
        peers::close_reason(&conn).await
    });
    assert_eq!(code, u64::from(close_code::PROTOCOL_VIOLATION));
    assert!(reason.contains("expected Metrics"), "{reason}");

    // The good agent was never disturbed and keeps storing; the coordinator is alive and small.
    let before = peers::stored_up_to(&pki, addr, "good").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let after = peers::stored_up_to(&pki, addr, "good").unwrap();
    assert!(
        after > before,
        "the good agent stopped being stored ({before} → {after})"
    );
    assert!(coordinator.is_running());
    let rss_after = coordinator.rss_kib();
    assert!(
        rss_after < rss_before + 32 * 1024,
        "coordinator RSS grew from {rss_before} KiB to {rss_after} KiB after hostile frames"
    );
    assert_eq!(
        good.log_text().matches("connected to coordinator").count(),
        1,
        "the good agent had to reconnect"
    );
    assert!(good.terminate(Duration::from_secs(10)).success());
    assert!(coordinator.terminate(Duration::from_secs(10)).success());
}

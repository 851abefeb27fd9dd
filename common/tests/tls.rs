//! The PKI: issued certificates carry name and role; files are never overwritten.

use demeter_common::protocol::Role;
use demeter_common::tls::{self, NodeIdentity};
use time::{Duration, OffsetDateTime};

#[test]
fn issued_certificate_names_its_holder_and_role() {
    let now = OffsetDateTime::now_utc();
    let ca = tls::generate_ca("test", now - Duration::hours(1), now + Duration::days(1)).unwrap();
    for role in [Role::Agent, Role::Coordinator, Role::Cli] {
        let node = tls::issue_cert(
            &ca,
            "node-7",
            role,
            now - Duration::hours(1),
            now + Duration::days(1),
        )
        .unwrap();
        let identity = NodeIdentity::from_pem(&ca.cert_pem, &node).unwrap();
        let peer = tls::identity_from_cert(&identity.chain[0]).unwrap();
        assert_eq!(peer.name, "node-7");
        assert_eq!(peer.role, role);
    }
}

#[test]
fn pki_directory_refuses_to_overwrite() {
    let dir = std::env::temp_dir().join(format!("demeter-pki-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let now = OffsetDateTime::now_utc();
    tls::init_ca_dir(&dir, "t", now, now + Duration::days(1)).unwrap();
    let again = tls::init_ca_dir(&dir, "t", now, now + Duration::days(1));
    assert!(again.is_err(), "a second init must not replace the CA");
    let (cert, key) =
        tls::issue_into_dir(&dir, "a1", Role::Agent, now, now + Duration::days(1)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(cert.exists());
    assert!(tls::issue_into_dir(&dir, "a1", Role::Agent, now, now + Duration::days(1)).is_err());
    assert!(
        tls::issue_into_dir(&dir, "../evil", Role::Agent, now, now + Duration::days(1)).is_err()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_stateless_reset_key_survives_a_restart_and_is_per_node() {
    let now = OffsetDateTime::now_utc();
    let ca = tls::generate_ca("test", now - Duration::hours(1), now + Duration::days(1)).unwrap();
    let issue = || {
        tls::issue_cert(
            &ca,
            "coordinator",
            Role::Coordinator,
            now - Duration::hours(1),
            now + Duration::days(1),
        )
        .unwrap()
    };
    let (pem, other) = (issue(), issue());
    let load = |pem| NodeIdentity::from_pem(&ca.cert_pem, pem).unwrap();
    // The same key loaded again (a restarted process): the same seed; another node's differs.
    let seed = tls::reset_key_seed(&load(&pem));
    assert_eq!(seed, tls::reset_key_seed(&load(&pem)));
    assert_ne!(seed, tls::reset_key_seed(&load(&other)));
}

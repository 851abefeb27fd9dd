//! The cluster's own PKI (rcgen) and the rustls/quinn configurations built from it.
//!
//! A certificate names its holder in the subject CN (and a DNS SAN, so the agent can verify
//! the coordinator by name) and its role in the subject OU. Both sides trust only the cluster
//! CA; the coordinator derives who a peer is from the verified certificate alone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use time::OffsetDateTime;

use crate::error::{Error, Result};
use crate::protocol::Role;

/// ALPN protocol id; a peer speaking something else fails the handshake.
pub const ALPN: &[u8] = b"demeter/1";

pub const CA_CERT_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca.key";

/// A certificate and its private key, PEM-encoded.
#[derive(Clone)]
pub struct PemPair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for PemPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PemPair").finish_non_exhaustive()
    }
}

fn cert_err(e: impl std::fmt::Display) -> Error {
    Error::Certificate(e.to_string())
}

/// Makes a new self-signed CA valid over `[not_before, not_after]`.
pub fn generate_ca(
    cluster: &str,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> Result<PemPair> {
    let key = KeyPair::generate().map_err(cert_err)?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("Demeter CA {cluster}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = not_before;
    params.not_after = not_after;
    let cert = params.self_signed(&key).map_err(cert_err)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Issues a node certificate for `name` with `role`, signed by the CA.
pub fn issue_cert(
    ca: &PemPair,
    name: &str,
    role: Role,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> Result<PemPair> {
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(cert_err)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(cert_err)?;
    let key = KeyPair::generate().map_err(cert_err)?;
    let mut params = CertificateParams::new(vec![name.to_string()]).map_err(cert_err)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params
        .distinguished_name
        .push(DnType::OrganizationalUnitName, role.as_str());
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match role {
        Role::Coordinator => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Role::Agent | Role::Cli => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    params.not_before = not_before;
    params.not_after = not_after;
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, &issuer).map_err(cert_err)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `contents` to a new file; refuses to overwrite, since replacing a CA or a key by
/// accident would lock every node out.
pub fn write_new(path: &Path, contents: &str, mode: u32) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io)?;
    file.write_all(contents.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

/// Loads the CA (certificate and key) from a PKI directory made by [`init_ca_dir`].
pub fn load_ca_dir(dir: &Path) -> Result<PemPair> {
    Ok(PemPair {
        cert_pem: read(&dir.join(CA_CERT_FILE))?,
        key_pem: read(&dir.join(CA_KEY_FILE))?,
    })
}

/// Creates `dir/ca.pem` and `dir/ca.key` (mode 0600).
pub fn init_ca_dir(
    dir: &Path,
    cluster: &str,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca = generate_ca(cluster, not_before, not_after)?;
    write_new(&dir.join(CA_KEY_FILE), &ca.key_pem, 0o600)?;
    write_new(&dir.join(CA_CERT_FILE), &ca.cert_pem, 0o644)
}

/// Issues `dir/NAME.pem` and `dir/NAME.key` (mode 0600) from the CA in `dir`.
pub fn issue_into_dir(
    dir: &Path,
    name: &str,
    role: Role,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> Result<(PathBuf, PathBuf)> {
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(Error::Certificate(format!(
            "node name {name:?} is not usable as a file name"
        )));
    }
    let ca = load_ca_dir(dir)?;
    let pair = issue_cert(&ca, name, role, not_before, not_after)?;
    let cert_path = dir.join(format!("{name}.pem"));
    let key_path = dir.join(format!("{name}.key"));
    write_new(&key_path, &pair.key_pem, 0o600)?;
    write_new(&cert_path, &pair.cert_pem, 0o644)?;
    Ok((cert_path, key_path))
}

/// Where a node finds its TLS material (configured per binary).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsPaths {
    /// The cluster CA certificate (PEM): the only issuer this node trusts.
    pub ca: PathBuf,
    /// This node's certificate (PEM), issued by the cluster CA.
    pub cert: PathBuf,
    /// This node's private key (PEM).
    pub key: PathBuf,
}

/// Parsed TLS material of one node.
#[derive(Debug)]
pub struct NodeIdentity {
    pub ca: Vec<CertificateDer<'static>>,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl NodeIdentity {
    pub fn load(paths: &TlsPaths) -> Result<Self> {
        Self::from_pem(
            &read(&paths.ca)?,
            &PemPair {
                cert_pem: read(&paths.cert)?,
                key_pem: read(&paths.key)?,
            },
        )
    }

    pub fn from_pem(ca_pem: &str, node: &PemPair) -> Result<Self> {
        let certs = |pem: &str, what: &str| -> Result<Vec<CertificateDer<'static>>> {
            let list = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Error::Tls(format!("{what}: {e}")))?;
            if list.is_empty() {
                return Err(Error::Tls(format!("{what}: no certificate in PEM")));
            }
            Ok(list)
        };
        Ok(NodeIdentity {
            ca: certs(ca_pem, "CA certificate")?,
            chain: certs(&node.cert_pem, "node certificate")?,
            key: PrivateKeyDer::from_pem_slice(node.key_pem.as_bytes())
                .map_err(|e| Error::Tls(format!("node key: {e}")))?,
        })
    }

    fn roots(&self) -> Result<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in &self.ca {
            roots
                .add(ca.clone())
                .map_err(|e| Error::Tls(format!("CA certificate: {e}")))?;
        }
        Ok(roots)
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

/// Keep-alives well inside the idle timeout so a quiet agent is not dropped, and a dead peer is
/// noticed within the timeout.
fn transport_config() -> Arc<quinn::TransportConfig> {
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(Duration::from_secs(5)));
    if let Ok(timeout) = quinn::IdleTimeout::try_from(Duration::from_secs(20)) {
        transport.max_idle_timeout(Some(timeout));
    }
    Arc::new(transport)
}

/// The server endpoint's configuration with its stateless-reset key and its connection-id
/// key derived from the node's private key, so both are the same after a restart. A peer whose
/// connection died with the old process sends its next packet to the new one, which recognises
/// the connection id as its own (quinn drops packets with ids its generator did not make) and
/// answers with a reset the peer recognises (the token is keyed): the peer reconnects at once.
/// With quinn's random per-process keys it waits out the idle timeout (20 s), which after a
/// coordinator crash delays resuming the operation that was in flight.
pub fn server_endpoint_config(identity: &NodeIdentity) -> quinn::EndpointConfig {
    let seed = reset_key_seed(identity);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &seed);
    let mut config = quinn::EndpointConfig::new(Arc::new(key));
    let cid_key = ring::digest::digest(&ring::digest::SHA256, &[b"cid".as_slice(), &seed].concat());
    let mut cid_key_bytes = [0u8; 8];
    cid_key_bytes.copy_from_slice(&cid_key.as_ref()[..8]);
    let cid_key = u64::from_le_bytes(cid_key_bytes);
    config.cid_generator(move || {
        Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
    });
    config
}

/// SHA-256 of a fixed label and the private key: secret, and stable for one key.
pub fn reset_key_seed(identity: &NodeIdentity) -> [u8; 32] {
    let mut material = b"demeter quic stateless reset v1\0".to_vec();
    material.extend_from_slice(identity.key.secret_der());
    let digest = ring::digest::digest(&ring::digest::SHA256, &material);
    let mut seed = [0u8; 32];
    seed.copy_from_slice(digest.as_ref());
    seed
}

/// Server side: TLS 1.3 only, client certificates required and verified against the CA.
pub fn server_config(identity: &NodeIdentity) -> Result<quinn::ServerConfig> {
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(identity.roots()?),
        provider(),
    )
    .build()
    .map_err(tls_err)?;
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())
        .map_err(tls_err)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(tls_err)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(transport_config());
    Ok(config)
}

/// Client side: trusts only the cluster CA and presents this node's certificate.
pub fn client_config(identity: &NodeIdentity) -> Result<quinn::ClientConfig> {
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err)?
        .with_root_certificates(identity.roots()?)
        .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())
        .map_err(tls_err)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(tls_err)?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport_config());
    Ok(config)
}

/// Who a verified peer is, read from its certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    pub name: String,
    pub role: Role,
}

/// Reads name (CN) and role (OU) from a peer's leaf certificate. The TLS layer has already
/// verified the chain; this only interprets it.
pub fn identity_from_cert(cert: &CertificateDer<'_>) -> Result<PeerIdentity> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| Error::Certificate(format!("unparsable peer certificate: {e}")))?;
    let subject = parsed.subject();
    fn first<'a>(
        mut attrs: impl Iterator<Item = &'a x509_parser::x509::AttributeTypeAndValue<'a>>,
        what: &str,
    ) -> Result<String> {
        attrs
            .next()
            .and_then(|attr| attr.as_str().ok())
            .map(str::to_string)
            .ok_or_else(|| Error::Certificate(format!("peer certificate has no {what}")))
    }
    let name = first(subject.iter_common_name(), "common name")?;
    let role = first(subject.iter_organizational_unit(), "role (OU)")?
        .parse::<Role>()
        .map_err(Error::Certificate)?;
    Ok(PeerIdentity { name, role })
}

/// The identity of the peer on an established connection.
pub fn peer_identity(connection: &quinn::Connection) -> Result<PeerIdentity> {
    let certs = connection
        .peer_identity()
        .and_then(|any| any.downcast::<Vec<CertificateDer<'static>>>().ok())
        .ok_or_else(|| Error::Certificate("peer presented no certificate".into()))?;
    let leaf = certs
        .first()
        .ok_or_else(|| Error::Certificate("peer presented an empty chain".into()))?;
    identity_from_cert(leaf)
}

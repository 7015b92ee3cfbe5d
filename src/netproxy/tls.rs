//! The TLS side of brokered secrets: a certificate authority made for the
//! session (its key only in this process's memory, its name constraints
//! limited to the brokered hosts), a certificate per brokered host signed
//! by it for the program's side of a terminated tunnel, and the client
//! configuration that verifies the real server against the system's trust
//! store (or `SSL_CERT_FILE` of nib's own environment). What crosses the
//! terminated tunnel is [`super::terminate`]'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The session's authority and what it made.
pub struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_der: CertificateDer<'static>,
    ca_pem: String,
    /// Server configurations by host, made on first use.
    servers: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
    /// How the proxy connects to real servers.
    client: Arc<rustls::ClientConfig>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The system's trust store as rustls reads it (`SSL_CERT_FILE` and
/// `SSL_CERT_DIR` of nib's environment first), in DER.
pub fn system_roots() -> Vec<CertificateDer<'static>> {
    rustls_native_certs::load_native_certs().certs
}

impl Authority {
    /// A new authority for `hosts`, trusting `roots` for real servers.
    pub fn new(hosts: &[String], roots: Vec<CertificateDer<'static>>) -> Result<Authority, String> {
        let fail = |e: rcgen::Error| format!("making the session's certificate authority: {e}");
        let key = rcgen::KeyPair::generate().map_err(fail)?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            "nib session CA (brokered secrets)",
        );
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        // Whatever happened to the key, it signs for these hosts only.
        params.name_constraints = Some(rcgen::NameConstraints {
            permitted_subtrees: hosts.iter().map(|h| permitted(h)).collect(),
            excluded_subtrees: Vec::new(),
        });
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(30);
        let ca = params.self_signed(&key).map_err(fail)?;
        let mut store = rustls::RootCertStore::empty();
        store.add_parsable_certificates(roots);
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(store)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Authority {
            ca_der: ca.der().clone(),
            ca_pem: ca.pem(),
            issuer: rcgen::Issuer::new(params, key),
            servers: Mutex::default(),
            client: Arc::new(client),
        })
    }

    /// The authority's certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// How the proxy connects to real servers.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(Arc::clone(&self.client))
    }

    /// How the proxy accepts a program's TLS for `host`, with a certificate
    /// for `host` signed by the authority (made once per host).
    pub fn acceptor(&self, host: &str) -> Result<tokio_rustls::TlsAcceptor, String> {
        let mut servers = self.servers.lock().map_err(|e| e.to_string())?;
        if let Some(config) = servers.get(host) {
            return Ok(tokio_rustls::TlsAcceptor::from(Arc::clone(config)));
        }
        let fail = |e: rcgen::Error| format!("a certificate for {host}: {e}");
        let key = rcgen::KeyPair::generate().map_err(fail)?;
        let mut params = rcgen::CertificateParams::new(vec![host.to_string()]).map_err(fail)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, host);
        params.use_authority_key_identifier_extension = true;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(30);
        let leaf = params.signed_by(&key, &self.issuer).map_err(fail)?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), self.ca_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(|e| format!("a certificate for {host}: {e}"))?;
        // HTTP/1.1 only: the relay reads requests one by one.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        servers.insert(host.to_string(), Arc::clone(&config));
        Ok(tokio_rustls::TlsAcceptor::from(config))
    }
}

/// The name constraint that lets the authority sign for `host` only.
fn permitted(host: &str) -> rcgen::GeneralSubtree {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => rcgen::GeneralSubtree::IpAddress(rcgen::CidrSubnet::from_addr_prefix(
            ip,
            if ip.is_ipv4() { 32 } else { 128 },
        )),
        Err(_) => rcgen::GeneralSubtree::DnsName(host.to_string()),
    }
}

/// Certificates in PEM, one after another (for the bundle programs trust).
pub fn pem_of(certs: &[CertificateDer<'_>]) -> String {
    use base64::Engine;
    let mut out = String::new();
    for c in certs {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let b64 = base64::engine::general_purpose::STANDARD.encode(c.as_ref());
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).unwrap_or_default());
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

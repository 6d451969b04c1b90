//! How an in-process component reaches this server: the loopback address
//! of the secure port, the CA that signed the serving certificate, and a
//! fresh client certificate for the component's user, signed with the
//! client CA's key.

use std::path::{Path, PathBuf};

use time::{Duration, OffsetDateTime};

use crate::config::ApiserverConfig;
use crate::pki::{self, Authority};

/// Credentials for `user` (in `group`, if any), or why there are none.
pub fn credentials(
    config: &ApiserverConfig,
    user: &str,
    group: Option<&str>,
) -> Result<capstan_client::connect::InlineCredentials, String> {
    if config.secure_port == 0 || config.client_ca_file.is_empty() {
        return Err("the server does not serve HTTPS with client certificates".into());
    }
    let client_ca = Path::new(&config.client_ca_file);
    let dir = client_ca.parent().unwrap_or(Path::new("."));
    let layout = pki::Pki::at(dir);
    let read = |path: &Path| pki::read(path).map_err(|e| e.to_string());
    let authority = Authority::load(&read(client_ca)?, &read(&layout.client_ca_key())?)
        .map_err(|e| e.to_string())?;
    // Valid from an hour ago: clocks of the processes may differ a little.
    let issued = authority
        .issue_client(
            user,
            group,
            OffsetDateTime::now_utc() - Duration::hours(1),
            Duration::days(365),
        )
        .map_err(|e| e.to_string())?;
    let ca_pem = match config.root_ca_file.as_str() {
        "" => read(&server_ca(config, &layout))?,
        file => read(Path::new(file))?,
    };
    let host = match config.bind_address.as_str() {
        "0.0.0.0" | "::" | "" => "127.0.0.1",
        address => address,
    };
    Ok(capstan_client::connect::InlineCredentials {
        server: format!("https://{host}:{}", config.secure_port),
        ca_pem,
        cert_pem: issued.certificate,
        key_pem: issued.key,
    })
}

/// The CA that signed the serving certificate: `server-ca.crt` beside it.
fn server_ca(config: &ApiserverConfig, client_layout: &pki::Pki) -> PathBuf {
    let serving = Path::new(&config.tls_cert_file);
    match serving.parent() {
        Some(dir) if !config.tls_cert_file.is_empty() => pki::Pki::at(dir).server_ca(),
        _ => client_layout.server_ca(),
    }
}

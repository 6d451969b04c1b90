//! Serving HTTP: the secure port (TLS, client certificates asked for),
//! the loopback plain port if one is asked for, until shutdown; the
//! components embedded in this process (`crate::embedded`) start once the
//! ports are bound, and stop first.

use std::future::Future;

use actix_web::{web, App, HttpServer};

use super::errors::StartError;
use crate::config::ApiserverConfig;
use crate::routes::{self, AppState};

/// Serves `state` on the ports `config` names until `shutdown` completes.
pub async fn serve(
    config: &ApiserverConfig,
    state: web::Data<AppState>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap(actix_web::middleware::from_fn(
                routes::chain::non_resource::guard,
            ))
            .configure(routes::configure)
    })
    .workers(2)
    .disable_signals()
    .on_connect(crate::serving::tag_connection);
    if let Some(tls) = tls(config)? {
        server =
            server.bind_rustls_0_23((config.bind_address.as_str(), config.secure_port), tls)?;
    }
    if config.insecure_port != 0 {
        tracing::warn!(
            port = config.insecure_port,
            "serving plain HTTP on 127.0.0.1 as a superuser"
        );
        server = server.bind(("127.0.0.1", config.insecure_port))?;
    }
    for address in server.addrs() {
        tracing::info!(%address, "capstan-apiserver serving");
    }
    let embedded = crate::embedded::start(config);
    let server = server.run();
    let handle = server.handle();
    tokio::select! {
        result = server => result?,
        _ = shutdown => {
            // First, so they give their Leases up through this server.
            let _ = actix_rt::task::spawn_blocking(move || embedded.stop()).await;
            handle.stop(true).await
        }
    }
    Ok(())
}

/// The rustls configuration of the secure port, unless it is off.
fn tls(config: &ApiserverConfig) -> Result<Option<rustls::ServerConfig>, StartError> {
    if config.secure_port == 0 {
        return Ok(None);
    }
    let client_ca = Some(config.client_ca_file.as_str()).filter(|f| !f.is_empty());
    let tls = crate::serving::tls::server_config(
        &config.tls_cert_file,
        &config.tls_private_key_file,
        client_ca,
    )?;
    Ok(Some(tls))
}

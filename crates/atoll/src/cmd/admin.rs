//! The admin HTTP server every long-running subcommand starts: `/metrics` (OpenMetrics text),
//! `/healthz` (the process runs) and `/readyz` (it has done its first full sync; while not, the
//! body says what it waits for when the process tracks that).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;

/// What `/readyz` reports.
pub trait ReadyCheck: Send + Sync + 'static {
    /// `None` when ready, otherwise what the process still waits for.
    fn not_ready(&self) -> Option<String>;
}

/// A flag set after the first full sync.
impl ReadyCheck for AtomicBool {
    fn not_ready(&self) -> Option<String> {
        (!self.load(Ordering::Relaxed)).then(|| "waiting for the first full sync".to_owned())
    }
}

/// Named things still awaited, e.g. watches that have not listed yet.
impl ReadyCheck for atoll_watch::Readiness {
    fn not_ready(&self) -> Option<String> {
        let waiting = self.waiting();
        (!waiting.is_empty()).then(|| format!("waiting for {}", waiting.join(", ")))
    }
}

#[derive(Clone)]
struct Admin {
    registry: Arc<Registry>,
    ready: Arc<dyn ReadyCheck>,
}

/// Binds `address` and serves in the background; returns the bound address (useful with port 0).
pub async fn serve<R: ReadyCheck>(
    address: SocketAddr,
    registry: Registry,
    ready: Arc<R>,
) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding the admin server to {address}"))?;
    let bound = listener.local_addr()?;
    let state = Admin {
        registry: Arc::new(registry),
        ready,
    };
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(state);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "admin server stopped");
        }
    });
    Ok(bound)
}

async fn metrics(State(admin): State<Admin>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &admin.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            String::new(),
        ),
    }
}

async fn readyz(State(admin): State<Admin>) -> impl IntoResponse {
    match admin.ready.not_ready() {
        None => (StatusCode::OK, "ready\n".to_owned()),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

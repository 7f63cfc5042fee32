//! The defences every mpiswarm server shares, in one home so that the API
//! server, the offer layer and the node agent defend themselves alike:
//!
//! - [`secret_eq`]: the one comparison of a presented token, password or
//!   secret with the expected one, in constant time (`subtle`), so that how
//!   long a refusal takes says nothing about how much of a guess was right;
//! - [`serve_tls`]: the one TLS accept loop, with a deadline on the TLS
//!   handshake ([`Limits::handshake_timeout`]) and a cap on open connections
//!   ([`Limits::max_connections`]);
//! - [`private`]: directories created `0700` and files `0600` from the
//!   start, for every secret a component keeps on disk.
//!
//! Past the cap a new connection is **refused**: accepted and closed at
//! once, before any TLS byte is read, so that a flood of idle connections
//! cannot make the server hold more sockets, tasks and TLS state than the
//! cap allows, and a refused client learns it at once (and retries with its
//! backoff) instead of waiting unseen in a queue. A connection counts from
//! its accept until it closes, its handshake included; refusals are logged
//! once each time the cap is reached, not once per connection.
//!
//! This crate must never decide who may do what (authentication and
//! authorisation belong to each component), nor know a protocol: it knows
//! TCP, TLS and HTTP, nothing of Kubernetes, Mesos or MpiJobs.

pub mod private;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Whether `presented` is `expected`, compared in constant time for inputs
/// of equal length (a length mismatch is refused at once: the length of a
/// secret is not what a timing attack is after).
pub fn secret_eq(presented: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    presented.as_bytes().ct_eq(expected.as_bytes()).into()
}

/// What one TLS listener allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a client has, from its connection's accept, to finish the
    /// TLS handshake; then the connection is closed.
    pub handshake_timeout: Duration,
    /// How many connections may be open at once; past it a new connection
    /// is refused (closed at once).
    pub max_connections: usize,
}

impl Default for Limits {
    /// 10 s for a handshake (as Go's `http.Transport` gives a client) and
    /// 4096 connections: far above what a cluster of mpiswarm components
    /// opens (one stream per agent and framework, a few kubectl and
    /// controller connections), far below what exhausts a process's files.
    fn default() -> Self {
        Self { handshake_timeout: Duration::from_secs(10), max_connections: 4096 }
    }
}

/// Serves `app` over TLS on `listener` within `limits` until `shutdown`
/// resolves; then it stops accepting, asks open connections to finish
/// (HTTP/1 after the request in flight, HTTP/2 with a GOAWAY) and returns
/// when they have. Handlers see the peer as axum's
/// `ConnectInfo<SocketAddr>`. Accept errors (out of file descriptors and
/// the like) are logged and retried after a pause, never returned.
pub async fn serve_tls(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    app: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let at_cap = Arc::new(AtomicBool::new(false));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            if !at_cap.swap(true, Ordering::Relaxed) {
                tracing::warn!(%peer, max_connections = limits.max_connections, "connection cap reached: refusing new connections until one closes");
            }
            drop(tcp);
            continue;
        };
        at_cap.store(false, Ordering::Relaxed);
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone().layer(axum::Extension(ConnectInfo(peer))));
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _permit = permit;
            let stream = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => {
                    return tracing::debug!(%peer, timeout = ?limits.handshake_timeout, "TLS handshake not finished in time; connection closed");
                }
            };
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests;

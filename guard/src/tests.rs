//! The listener's refusals on real sockets and a real TLS client; every
//! wait has a deadline.

use super::*;

use std::net::SocketAddr;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const DEADLINE: Duration = Duration::from_secs(30);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server config and a client config that trusts it, for `localhost`.
fn configs() -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    let der = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
    let server = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![der.clone()], key)
        .expect("server config");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).expect("root");
    let client = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// A server on a free loopback port, stopped when the returned sender drops.
async fn start(limits: Limits) -> (SocketAddr, Arc<rustls::ClientConfig>, tokio::sync::oneshot::Sender<()>) {
    let (server, client) = configs();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "served" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_tls(listener, server, app, limits, async move {
        let _ = stopped.await;
    }));
    (addr, client, stop)
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

async fn handshake(addr: SocketAddr, client: &Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").expect("name");
    tokio_rustls::TlsConnector::from(Arc::clone(client)).connect(name, tcp).await
}

/// An HTTP/1.1 GET of `/` on an open TLS stream; the body of the answer.
async fn get(mut tls: Tls) -> String {
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.expect("request");
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.expect("answer");
    answer
}

/// Reads until the server closes the connection: Ok(bytes read before it).
async fn until_closed(tcp: &mut TcpStream) -> usize {
    let mut buf = [0u8; 1024];
    let mut total = 0;
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}

#[test]
fn secrets_are_equal_only_when_every_byte_and_the_length_match() {
    assert!(secret_eq("s3cret", "s3cret"));
    assert!(!secret_eq("s3creT", "s3cret"));
    assert!(!secret_eq("s3cre", "s3cret"), "a prefix is not the secret");
    assert!(!secret_eq("s3crett", "s3cret"));
    assert!(!secret_eq("", "s3cret"));
    assert!(secret_eq("", ""), "the comparison alone does not refuse empty secrets: start-up does");
}

#[tokio::test]
async fn a_client_that_never_finishes_its_handshake_is_disconnected() {
    let limits = Limits { handshake_timeout: Duration::from_millis(200), max_connections: 8 };
    let (addr, client, _stop) = start(limits).await;
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let read = tokio::time::timeout(DEADLINE, until_closed(&mut silent)).await;
    assert_eq!(read.expect("the server closes a connection that sends no ClientHello"), 0);
    let served = tokio::time::timeout(DEADLINE, async { get(handshake(addr, &client).await.expect("tls")).await });
    assert!(served.await.expect("in time").ends_with("served"), "a client that does finish is served");
}

#[tokio::test]
async fn past_the_connection_cap_a_new_connection_is_refused_until_one_closes() {
    let limits = Limits { handshake_timeout: Duration::from_secs(30), max_connections: 1 };
    let (addr, client, _stop) = start(limits).await;
    let first = tokio::time::timeout(DEADLINE, handshake(addr, &client)).await.expect("in time").expect("first");
    let second = tokio::time::timeout(DEADLINE, handshake(addr, &client)).await.expect("refused in time, not queued");
    assert!(second.is_err(), "the second connection is closed before its handshake");
    drop(first);
    // The server notices the close on its own schedule: retry until it has.
    let third = tokio::time::timeout(DEADLINE, async {
        loop {
            if let Ok(tls) = handshake(addr, &client).await {
                return get(tls).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(third.await.expect("a connection is accepted again once one closed").ends_with("served"));
}

#[tokio::test]
async fn shutdown_stops_accepting_and_returns_once_connections_end() {
    let (server, client) = configs();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "served" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(serve_tls(listener, server, app, Limits::default(), async move {
        let _ = stopped.await;
    }));
    let answer = tokio::time::timeout(DEADLINE, async { get(handshake(addr, &client).await.expect("tls")).await });
    assert!(answer.await.expect("in time").ends_with("served"));
    stop.send(()).expect("server running");
    tokio::time::timeout(DEADLINE, served).await.expect("returns after shutdown").expect("no panic");
    assert!(TcpStream::connect(addr).await.is_err(), "the listener is closed");
}

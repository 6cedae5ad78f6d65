//! `/metrics`, `/healthz` and `/readyz` on a plain HTTP port: three fixed answers need no web framework.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus::{Encoder, Registry, TextEncoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub(crate) async fn serve(listener: TcpListener, registry: Registry, ready: Arc<AtomicBool>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let registry = registry.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let mut buffer = vec![0u8; 4096];
            let Ok(n) = stream.read(&mut buffer).await else {
                return;
            };
            let request = String::from_utf8_lossy(&buffer[..n]);
            let path = request
                .lines()
                .next()
                .and_then(|line| line.split_whitespace().nth(1))
                .unwrap_or("/");
            let (status, content_type, body) = respond(path, &registry, &ready);
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body).await;
        });
    }
}

fn respond(
    path: &str,
    registry: &Registry,
    ready: &AtomicBool,
) -> (&'static str, &'static str, Vec<u8>) {
    match path.split('?').next().unwrap_or(path) {
        "/metrics" => {
            let mut body = Vec::new();
            let encoder = TextEncoder::new();
            match encoder.encode(&registry.gather(), &mut body) {
                Ok(()) => ("200 OK", "text/plain; version=0.0.4", body),
                Err(e) => (
                    "500 Internal Server Error",
                    "text/plain",
                    e.to_string().into_bytes(),
                ),
            }
        }
        "/healthz" | "/livez" => ("200 OK", "text/plain", b"ok".to_vec()),
        "/readyz" if ready.load(Ordering::Acquire) => ("200 OK", "text/plain", b"ok".to_vec()),
        "/readyz" => (
            "503 Service Unavailable",
            "text/plain",
            b"informer caches not synced".to_vec(),
        ),
        _ => ("404 Not Found", "text/plain", b"not found".to_vec()),
    }
}

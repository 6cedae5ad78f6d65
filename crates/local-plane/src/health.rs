//! Waiting for components to become healthy, failing fast (with the log tail) if one of them dies.

use std::future::Future;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{ManagedProcess, PlaneError};

const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Polls `probe` until it returns `Ok(true)`; between attempts checks that every process in `watched`
/// is still running. The last probe error (if any) is part of the timeout message.
pub(crate) async fn wait_until<F, Fut>(
    what: &str,
    timeout: Duration,
    watched: &mut [ManagedProcess],
    mut probe: F,
) -> Result<(), PlaneError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, String>>,
{
    let started = tokio::time::Instant::now();
    let mut last_error = String::new();
    loop {
        for process in watched.iter_mut() {
            process.check_running()?;
        }
        match probe().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last_error = e,
        }
        if started.elapsed() >= timeout {
            return Err(PlaneError::Timeout {
                what: what.to_string(),
                waited: timeout,
                detail: if last_error.is_empty() {
                    String::new()
                } else {
                    format!(" (last error: {last_error})")
                },
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// `GET http://127.0.0.1:<port><path>` over a bare HTTP/1.0 connection (etcd's client port speaks plain
/// HTTP); returns the response body if the status is 200.
pub(crate) async fn plain_http_get(port: u16, path: &str) -> Result<String, String> {
    plain_http(
        port,
        format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
    )
    .await
}

/// `POST http://127.0.0.1:<port><path>` with a JSON body, as [`plain_http_get`] (etcd's JSON gateway).
pub(crate) async fn plain_http_post(port: u16, path: &str, json: &str) -> Result<String, String> {
    plain_http(
        port,
        format!(
            "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
            json.len()
        ),
    )
    .await
}

async fn plain_http(port: u16, request: String) -> Result<String, String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    if head.lines().next().is_some_and(|l| l.contains(" 200 ")) {
        Ok(body.to_string())
    } else {
        Err(head.lines().next().unwrap_or("empty response").to_string())
    }
}

/// `GET <path>` through a kube client (TLS to our CA, admin token); Ok(true) when the body is `ok`.
pub(crate) async fn https_ok(client: &kube::Client, path: &str) -> Result<bool, String> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match client.request_text(request).await {
        Ok(body) => Ok(body.trim() == "ok"),
        Err(e) => Err(e.to_string()),
    }
}

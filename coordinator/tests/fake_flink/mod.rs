//! A scripted one-request-per-connection HTTP server standing in for Flink's REST endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use demeter_coordinator::flink::{ClientConfig, FlinkClient, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone)]
pub enum Reply {
    Json(u16, &'static str),
    /// Answers only after the delay (beyond the client's timeout in these tests).
    Slow(Duration, &'static str),
    /// Reads the request, then closes the socket without answering.
    Drop,
}

/// A one-request-per-connection HTTP server answering from a script, recording what it got.
pub struct FakeFlink {
    pub url: String,
    received: Arc<Mutex<Vec<String>>>,
}

impl FakeFlink {
    pub async fn start(script: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let log = received.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (log, script) = (log.clone(), script.clone());
                tokio::spawn(async move { serve(socket, log, script).await });
            }
        });
        Self { url, received }
    }

    pub fn requests(&self) -> Vec<String> {
        self.received.lock().unwrap().clone()
    }

    pub fn client(&self) -> FlinkClient {
        let config = ClientConfig {
            request_timeout: Duration::from_millis(300),
            upload_timeout: Duration::from_millis(300),
            connect_timeout: Duration::from_millis(300),
            retry: RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(40),
            },
            jitter_seed: 1,
        };
        FlinkClient::new(&self.url, config).unwrap()
    }
}

async fn serve(
    mut socket: TcpStream,
    log: Arc<Mutex<Vec<String>>>,
    script: Arc<Mutex<VecDeque<Reply>>>,
) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    log.lock().unwrap().push(request);
    let reply = script.lock().unwrap().pop_front();
    let (code, body) = match reply {
        Some(Reply::Json(code, body)) => (code, body),
        Some(Reply::Slow(delay, body)) => {
            tokio::time::sleep(delay).await;
            (200, body)
        }
        Some(Reply::Drop) => return,
        None => (500, r#"{"errors":["script exhausted"]}"#),
    };
    let head = format!(
        "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(body.as_bytes()).await;
}

/// Returns "METHOD /path?query" followed by the body as text.
async fn read_request(socket: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_lowercase();
    let content_length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = head.contains("transfer-encoding: chunked");
    loop {
        let body = &buf[header_end..];
        let complete = match content_length {
            Some(len) => body.len() >= len,
            None => !chunked || body.ends_with(b"0\r\n\r\n"),
        };
        if complete {
            break;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let request_line = text.lines().next().unwrap_or_default();
    let target: Vec<&str> = request_line.split(' ').take(2).collect();
    Some(format!("{}\n{}", target.join(" "), &text[header_end..]))
}

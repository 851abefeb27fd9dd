//! A fault-injecting HTTP/1.1 proxy for Flink's REST API: each request is matched against
//! rules (method, path fragment, how many times) and then passed through, answered with an
//! error status without reaching Flink, passed through with its answer thrown away (Flink acted,
//! the client never hears), or held until the client gives up. One request per connection
//! (`Connection: close` both ways), so a fault never leaks into the next request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status and no body; Flink never sees the request.
    Status(u16),
    /// Forward, let Flink act, then close the connection without an answer.
    DropResponse,
    /// Neither forward nor answer; hold the connection until the client times out.
    Hang,
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub method: &'static str,
    pub path_contains: &'static str,
    pub fault: Fault,
    /// How many matching requests get the fault.
    pub times: u32,
}

#[derive(Debug, Clone)]
pub struct FaultyProxy {
    pub addr: SocketAddr,
    rules: Arc<Mutex<Vec<Rule>>>,
    /// `METHOD path -> fault` for every injected fault.
    pub injected: Arc<Mutex<Vec<String>>>,
}

impl FaultyProxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Self {
            addr: listener.local_addr().unwrap(),
            rules: Arc::default(),
            injected: Arc::default(),
        };
        let p = proxy.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let p = p.clone();
                tokio::spawn(async move {
                    let _ = p.serve(client, upstream).await;
                });
            }
        });
        proxy
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn add(&self, rule: Rule) {
        self.rules.lock().unwrap().push(rule);
    }

    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }

    fn decide(&self, method: &str, path: &str) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap();
        let rule = rules
            .iter_mut()
            .find(|r| r.times > 0 && r.method == method && path.contains(r.path_contains))?;
        rule.times -= 1;
        self.injected
            .lock()
            .unwrap()
            .push(format!("{method} {path} -> {:?}", rule.fault));
        Some(rule.fault)
    }

    async fn serve(&self, mut client: TcpStream, upstream: SocketAddr) -> std::io::Result<()> {
        let Some((head, body)) = read_message(&mut client).await? else {
            return Ok(());
        };
        let request_line = head.lines().next().unwrap_or_default().to_string();
        let mut parts = request_line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let fault = self.decide(method, path);
        match fault {
            Some(Fault::Status(code)) => {
                let answer = format!(
                    "HTTP/1.1 {code} Injected\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
                );
                client.write_all(answer.as_bytes()).await?;
                return client.shutdown().await;
            }
            Some(Fault::Hang) => {
                tokio::time::sleep(Duration::from_secs(120)).await;
                return Ok(());
            }
            _ => {}
        }
        let mut up = TcpStream::connect(upstream).await?;
        up.write_all(with_close(&head).as_bytes()).await?;
        up.write_all(&body).await?;
        let mut response = Vec::new();
        up.read_to_end(&mut response).await?;
        if fault == Some(Fault::DropResponse) {
            // Flink acted; the client only sees the connection die.
            return Ok(());
        }
        let split = find(&response, b"\r\n\r\n").map_or(response.len(), |i| i + 4);
        let head = String::from_utf8_lossy(&response[..split]).into_owned();
        client
            .write_all(with_close(head.trim_end()).as_bytes())
            .await?;
        client.write_all(&response[split..]).await?;
        client.shutdown().await
    }
}

/// The head with any `Connection` header replaced by `Connection: close`, ending in CRLF CRLF.
fn with_close(head: &str) -> String {
    let mut out: Vec<&str> = head
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:") && !l.is_empty())
        .collect();
    out.push("Connection: close");
    format!("{}\r\n\r\n", out.join("\r\n"))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request: head (text, without the blank line) and body (by content-length, or
/// chunked up to the last chunk).
async fn read_message(s: &mut TcpStream) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut body = buf[head_end + 4..].to_vec();
    let lower = head.to_ascii_lowercase();
    let length = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = lower.contains("transfer-encoding: chunked");
    loop {
        let complete = match length {
            Some(len) => body.len() >= len,
            None if chunked => find(&body, b"0\r\n\r\n").is_some(),
            None => true,
        };
        if complete {
            break;
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some((head, body)))
}

//! The soak's "outside world": a small HTTP/1.1 key-value service on
//! loopback that the operator HTTP tools `kv:get`, `kv:put` and `kv:slow`
//! call. It runs on its own thread and tokio runtime (it is not the code
//! under test), keeps at most [`MAX_KEYS`] keys, and holds nothing per
//! request, so it never grows with the length of the run.
//!
//! - `POST /put` `{"key": k, "value": v}` → `{"ok": true, "n": <put number>}`
//! - `POST /get` `{"key": k}` → `{"ok": true, "value": v|null}`
//! - `POST /slow` → waits [`SLOW`], then answers `{"ok": true}` (the tool's
//!   timeout is shorter: a slow upstream)
//! - anything else → 404.

use anyhow::{Context as _, Result, anyhow};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// Keys the store holds at most (a put beyond it is refused with 400).
pub const MAX_KEYS: usize = 1024;
/// Largest request head + body read.
const MAX_REQUEST: usize = 64 << 10;
/// How long `/slow` waits before answering.
pub const SLOW: Duration = Duration::from_secs(3);

/// The running service.
#[derive(Clone)]
pub struct KvServer {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    map: Mutex<HashMap<String, Value>>,
    puts: AtomicU64,
    requests: AtomicU64,
}

impl KvServer {
    /// Starts the service on 127.0.0.1 on a thread of its own.
    pub fn start() -> Result<KvServer> {
        let (tx, rx) = std::sync::mpsc::channel();
        let state = Arc::new(State::default());
        let st = state.clone();
        std::thread::Builder::new()
            .name("soak-kv".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(anyhow!("kv runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match TcpListener::bind("127.0.0.1:0").await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = tx.send(Err(anyhow!("kv bind: {e}")));
                            return;
                        }
                    };
                    let _ = tx.send(listener.local_addr().map_err(anyhow::Error::from));
                    loop {
                        let Ok((sock, _)) = listener.accept().await else {
                            continue;
                        };
                        tokio::spawn(connection(sock, st.clone()));
                    }
                });
            })?;
        let addr = rx.recv().context("kv server thread")??;
        Ok(KvServer { addr, state })
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests answered or started so far.
    pub fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::Relaxed)
    }
}

/// Serves one keep-alive connection until the peer closes it or sends
/// something malformed.
async fn connection(mut sock: TcpStream, st: Arc<State>) {
    let _ = sock.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > MAX_REQUEST {
                return;
            }
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let path = head.split(' ').nth(1).unwrap_or("").to_owned();
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        if len > MAX_REQUEST {
            return;
        }
        while buf.len() < head_end + len {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Value =
            serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
        buf.drain(..head_end + len);
        st.requests.fetch_add(1, Ordering::Relaxed);
        let (status, reply) = answer(&path, &body, &st).await;
        let reply = reply.to_string();
        let resp = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if sock.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn answer(path: &str, body: &Value, st: &State) -> (u16, Value) {
    let key = body.get("key").and_then(Value::as_str).map(str::to_owned);
    match (path, key) {
        ("/put", Some(k)) => {
            let mut map = st.map.lock().unwrap_or_else(|p| p.into_inner());
            if map.len() >= MAX_KEYS && !map.contains_key(&k) {
                return (400, json!({"error": "too many keys"}));
            }
            map.insert(k, body.get("value").cloned().unwrap_or(Value::Null));
            let n = st.puts.fetch_add(1, Ordering::Relaxed) + 1;
            (200, json!({"ok": true, "n": n}))
        }
        ("/get", Some(k)) => {
            let map = st.map.lock().unwrap_or_else(|p| p.into_inner());
            (
                200,
                json!({"ok": true, "value": map.get(&k).cloned().unwrap_or(Value::Null)}),
            )
        }
        ("/slow", _) => {
            tokio::time::sleep(SLOW).await;
            (200, json!({"ok": true}))
        }
        ("/put" | "/get", None) => (400, json!({"error": "key is required"})),
        _ => (404, json!({"error": "not found"})),
    }
}

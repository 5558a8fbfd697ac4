//! Exporting spans over OTLP/HTTP with the JSON encoding (`http/json`,
//! `POST <endpoint>` of an `ExportTraceServiceRequest`), on a thread of its
//! own:
//! invocations hand their spans to a bounded queue and never wait on the
//! collector; a full queue drops spans (counted) rather than slowing a
//! node. Off unless an endpoint is configured: [`Config::from_env`] reads
//! the standard `OTEL_EXPORTER_OTLP_*` variables.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};
pub use wop_core::sampling::Sampler;
use wop_core::trace::{Span, otlp_json_bytes};

/// Spans waiting or being sent, at most: what a slow or dead collector can
/// make the host hold (a span is at most a few KiB: attribute values are
/// capped), whatever packs do. Past it, spans are dropped and counted.
pub const MAX_QUEUED_SPANS: usize = 16_384;
/// Spans per request, at most; a full batch is sent at once.
const BATCH: usize = 512;
/// Longest a span waits for a fuller batch.
const LINGER: Duration = Duration::from_millis(200);

/// Where and how to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The traces endpoint (`…/v1/traces`).
    pub endpoint: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub headers: Vec<(String, String)>,
    /// Which traces are recorded (`OTEL_TRACES_SAMPLER`,
    /// `OTEL_TRACES_SAMPLER_ARG`; default `parentbased_always_on`).
    pub sampler: Sampler,
}

impl Config {
    /// From `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`), with
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS` or else
    /// `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k=v`, keys and values
    /// percent-decoded as the OTel specification says: `Bearer%20x` sends
    /// `Bearer x`); `None` when neither endpoint is set or
    /// `OTEL_SDK_DISABLED=true`. Returns also a warning when
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` asks for an encoding other than
    /// `http/json`, the one this exporter speaks, or when a header entry is
    /// not a valid header (it is left out; the warning names its key,
    /// never its value).
    pub fn from_env() -> (Option<Config>, Option<String>) {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// The sampler the standard variables name, and a warning for what was
    /// not understood (for an endpoint given another way than by
    /// variable, e.g. `wop run --otlp`).
    pub fn sampler_from_env() -> (Sampler, Option<String>) {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Sampler::from_vars(
            var("OTEL_TRACES_SAMPLER").as_deref(),
            var("OTEL_TRACES_SAMPLER_ARG").as_deref(),
        )
    }

    /// [`Config::from_env`] over any variable lookup.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> (Option<Config>, Option<String>) {
        let var = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return (None, None);
        }
        let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| {
            var("OTEL_EXPORTER_OTLP_ENDPOINT")
                .map(|e| format!("{}/v1/traces", e.trim_end_matches('/')))
        });
        let Some(endpoint) = endpoint else {
            return (None, None);
        };
        let mut warnings: Vec<String> = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .filter(|p| p != "http/json")
            .map(|p| {
                format!("OTLP protocol `{p}` is not supported; traces are exported as http/json")
            })
            .into_iter()
            .collect();
        let (headers, skipped) = var("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| var("OTEL_EXPORTER_OTLP_HEADERS"))
            .map(|h| parse_headers(&h))
            .unwrap_or_default();
        warnings.extend(skipped);
        let (sampler, sampler_warning) = Sampler::from_vars(
            var("OTEL_TRACES_SAMPLER").as_deref(),
            var("OTEL_TRACES_SAMPLER_ARG").as_deref(),
        );
        warnings.extend(sampler_warning);
        let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
        (
            Some(Config {
                endpoint,
                headers,
                sampler,
            }),
            warning,
        )
    }
}

/// `k=v,k=v` with keys and values trimmed and percent-decoded (the OTel
/// exporter specification's format for `OTEL_EXPORTER_OTLP_HEADERS`),
/// and a warning for each entry that is not a valid header.
fn parse_headers(text: &str) -> (Vec<(String, String)>, Vec<String>) {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s.trim())
            .decode_utf8()
            .map(|c| c.into_owned())
            .ok()
    };
    let mut headers = Vec::new();
    let mut skipped = Vec::new();
    for entry in text.split(',').filter(|e| !e.trim().is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            skipped.push(format!(
                "OTLP header entry `{}` has no `=`; left out",
                entry.trim().chars().take(64).collect::<String>()
            ));
            continue;
        };
        let key =
            decode(k).filter(|k| reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_ok());
        let value = decode(v).filter(|v| reqwest::header::HeaderValue::from_str(v).is_ok());
        match (key, value) {
            (Some(k), Some(v)) => headers.push((k, v)),
            _ => skipped.push(format!(
                "OTLP header `{}` is not a valid header name and percent-encoded value; left out",
                k.trim().chars().take(64).collect::<String>()
            )),
        }
    }
    (headers, skipped)
}

/// What invocations hand over and the exporter thread takes: spans wait
/// here without waking anyone until a batch is full, the first span of a
/// quiet period arrives (it starts the linger), a flush is asked for or
/// the exporter is dropped. Before, every invocation's spans woke the
/// exporter's thread through a channel: at full load that was a wake-up
/// and a trip through the other core per invocation.
#[derive(Default)]
struct Queue {
    spans: Mutex<Vec<Span>>,
    flushes: Mutex<Vec<oneshot::Sender<()>>>,
    wake: Notify,
    closed: AtomicBool,
}

impl Queue {
    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the exporter should send now rather than linger.
    fn due(&self) -> bool {
        self.closed.load(Ordering::Acquire)
            || !Self::lock(&self.flushes).is_empty()
            || Self::lock(&self.spans).len() >= BATCH
    }
}

/// The exporter. Cheap to share (`Arc`).
pub struct Exporter {
    cfg: Config,
    service_version: String,
    queue: OnceLock<Arc<Queue>>,
    dropped: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    /// Spans handed over and not yet sent (or given up).
    queued: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("endpoint", &self.cfg.endpoint)
            .finish_non_exhaustive()
    }
}

impl Drop for Exporter {
    /// The thread sends what is waiting and ends.
    fn drop(&mut self) {
        if let Some(q) = self.queue.get() {
            q.closed.store(true, Ordering::Release);
            q.wake.notify_one();
        }
    }
}

impl Exporter {
    /// An exporter to `cfg` (its thread starts on first use).
    pub fn new(cfg: Config, service_version: &str) -> Arc<Exporter> {
        Arc::new(Exporter {
            cfg,
            service_version: service_version.to_owned(),
            queue: OnceLock::new(),
            dropped: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            queued: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Which traces are recorded.
    pub fn sampler(&self) -> Sampler {
        self.cfg.sampler
    }

    /// Spans dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Export requests the collector did not accept.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    fn queue(&self) -> &Arc<Queue> {
        self.queue.get_or_init(|| {
            let queue = Arc::new(Queue::default());
            let (cfg, version, q, failed, queued) = (
                self.cfg.clone(),
                self.service_version.clone(),
                queue.clone(),
                self.failed.clone(),
                self.queued.clone(),
            );
            // Its own thread and runtime: exporting never competes with
            // invocations for the caller's runtime (a current-thread one
            // would only make progress between invocations), and it ends
            // when the exporter is dropped.
            let started = std::thread::Builder::new()
                .name("wop-otlp".to_owned())
                .spawn(move || {
                    match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt.block_on(run(q, cfg, version, Counters { failed, queued })),
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot start the OTLP exporter; traces are not exported");
                        }
                    }
                });
            if let Err(e) = started {
                tracing::warn!(error = %e, "cannot start the OTLP exporter thread; traces are not exported");
            }
            queue
        })
    }

    /// Queues `spans`; never waits.
    pub fn export(&self, spans: Vec<Span>) {
        let n = spans.len();
        if n == 0 {
            return;
        }
        if self.queued.fetch_add(n, Ordering::Relaxed) + n > MAX_QUEUED_SPANS {
            self.queued.fetch_sub(n, Ordering::Relaxed);
            self.dropped.fetch_add(n as u64, Ordering::Relaxed);
            return;
        }
        let q = self.queue();
        let wake = {
            let mut waiting = Queue::lock(&q.spans);
            let was_empty = waiting.is_empty();
            waiting.extend(spans);
            was_empty || waiting.len() >= BATCH
        };
        if wake {
            q.wake.notify_one();
        }
    }

    /// Waits until everything queued so far was sent (or failed), at most
    /// `within`.
    pub async fn flush(&self, within: Duration) {
        let (tx, rx) = oneshot::channel();
        let q = self.queue();
        Queue::lock(&q.flushes).push(tx);
        q.wake.notify_one();
        let _ = tokio::time::timeout(within, rx).await;
    }
}

/// What the exporter thread counts.
struct Counters {
    failed: Arc<AtomicU64>,
    queued: Arc<AtomicUsize>,
}

async fn run(q: Arc<Queue>, cfg: Config, version: String, c: Counters) {
    let client = match reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot build the OTLP client; traces are not exported");
            return;
        }
    };
    loop {
        // Something arrived; wait up to LINGER for a fuller batch unless
        // a batch is full, a flush waits or the exporter is gone.
        q.wake.notified().await;
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        while !q.due() {
            tokio::select! {
                () = q.wake.notified() => {}
                () = &mut linger => break,
            }
        }
        // Flushes first: every span queued before a flush was asked for is
        // then in `spans`, and is sent before the flush is answered.
        let flushes = std::mem::take(&mut *Queue::lock(&q.flushes));
        let spans = std::mem::take(&mut *Queue::lock(&q.spans));
        for batch in spans.chunks(BATCH) {
            send(&client, &cfg, &version, batch, &c).await;
        }
        for done in flushes {
            let _ = done.send(());
        }
        if q.closed.load(Ordering::Acquire) && Queue::lock(&q.spans).is_empty() {
            return;
        }
    }
}

async fn send(client: &reqwest::Client, cfg: &Config, version: &str, batch: &[Span], c: &Counters) {
    if batch.is_empty() {
        return;
    }
    let body = otlp_json_bytes("wop", version, batch);
    let n = batch.len();
    let failed = &c.failed;
    let mut req = client
        .post(&cfg.endpoint)
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in &cfg.headers {
        req = req.header(k, v);
    }
    let sent = req.send().await;
    c.queued.fetch_sub(n, Ordering::Relaxed);
    match sent {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => {
            failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(status = r.status().as_u16(), endpoint = %cfg.endpoint, "the OTLP collector refused a trace export");
        }
        Err(e) => {
            failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, endpoint = %cfg.endpoint, "cannot export traces");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> (Option<Config>, Option<String>) {
        Config::from_vars(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn a_collector_that_never_answers_holds_at_most_max_queued_spans() {
        // Accepts and never reads or answers: the first export hangs for
        // the client's timeout, and everything after it waits or drops.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for c in l.incoming().flatten() {
                held.push(c);
            }
        });
        let e = Exporter::new(
            Config {
                endpoint: format!("http://{addr}/v1/traces"),
                headers: Vec::new(),
                sampler: Sampler::AlwaysOn,
            },
            "test",
        );
        for _ in 0..20 {
            e.export(vec![span(2); 1000]);
        }
        assert_eq!(e.dropped(), 4000, "16 batches fit under the cap, 4 do not");
        assert!(e.queued.load(Ordering::Relaxed) <= MAX_QUEUED_SPANS);
    }

    fn span(i: u8) -> Span {
        Span {
            trace_id: [1; 16],
            span_id: [i.max(1); 8],
            parent: None,
            name: "openwop.node".into(),
            start_ns: 1,
            end_ns: 2,
            client: false,
            attributes: Vec::new(),
            error: None,
        }
    }

    /// Spans handed over one invocation at a time reach a real collector,
    /// all of them, in requests of at most `BATCH` spans; a flush returns
    /// when they have been sent; a quiet exporter sends what waits within
    /// `LINGER`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_spans_are_sent_in_batches_and_a_flush_waits_for_them() {
        let collector =
            wop_testkit::Server::start_detached(wop_testkit::Mode::Status(200, "{}".into()));
        let e = Exporter::new(
            Config {
                endpoint: collector.url("/v1/traces"),
                headers: Vec::new(),
                sampler: Sampler::AlwaysOn,
            },
            "test",
        );
        let per_request = |c: &wop_testkit::Server| -> Vec<usize> {
            c.requests()
                .iter()
                .map(|r| {
                    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
                    v["resourceSpans"][0]["scopeSpans"][0]["spans"]
                        .as_array()
                        .map_or(0, Vec::len)
                })
                .collect()
        };
        for i in 0..1200u32 {
            e.export(vec![span((i % 250) as u8)]);
        }
        e.flush(Duration::from_secs(10)).await;
        let sizes = per_request(&collector);
        assert_eq!(sizes.iter().sum::<usize>(), 1200, "{sizes:?}");
        assert!(sizes.iter().all(|n| (1..=BATCH).contains(n)), "{sizes:?}");
        assert_eq!((e.dropped(), e.failed()), (0, 0));
        assert_eq!(e.queued.load(Ordering::Relaxed), 0);
        // Fewer than a batch, no flush: sent within the linger.
        let before = collector.count();
        e.export(vec![span(7); 3]);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while collector.count() == before && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(per_request(&collector).last(), Some(&3));
    }

    #[test]
    fn the_standard_variables_configure_it_and_nothing_else_turns_it_on() {
        assert_eq!(with(&[]), (None, None));
        let (c, w) = with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")]);
        assert_eq!(c.unwrap().endpoint, "http://c:4318/v1/traces");
        assert!(w.is_none());
        let (c, _) = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/x"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1, b = 2,junk"),
        ]);
        let c = c.unwrap();
        assert_eq!(c.endpoint, "http://t:9/x");
        assert_eq!(
            c.headers,
            [("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        // Percent-decoded, as the specification (and OPERATIONS.md's
        // `Bearer%20…`) says; an invalid entry is left out and named, its
        // value never shown.
        let (c, w) = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20s3cret%2Cx, x-tenant = a%3Db,bad key=1,x-nl=a%0Ab",
            ),
        ]);
        assert_eq!(
            c.unwrap().headers,
            [
                ("authorization".into(), "Bearer s3cret,x".into()),
                ("x-tenant".into(), "a=b".into())
            ]
        );
        let w = w.unwrap();
        assert!(w.contains("`bad key`") && w.contains("`x-nl`"), "{w}");
        assert!(!w.contains("s3cret") && !w.contains("a%0Ab"), "{w}");
        // The traces-only variable wins.
        let (c, _) = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=2"),
        ]);
        assert_eq!(c.unwrap().headers, [("b".into(), "2".into())]);
        let (c, w) = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]);
        assert!(c.is_some());
        assert!(w.unwrap().contains("`grpc` is not supported"));
        let (c, _) = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ]);
        assert!(c.is_none());
    }
}

//! The HTTP server: accepts connections on 127.0.0.1, records each request,
//! picks the scripted response that matches it and answers in the format
//! its path names.
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::formats::{Ctx, Format};
use super::respond::{answer, json_response, Body};
use super::script::{Script, ScriptedResponse};

/// A request the server received.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names lowercased; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON when it parses, else a JSON string of the raw text.
    pub body: Value,
}

/// Called with each recorded request (the CLI's `--record` file).
pub(crate) type Observer = Arc<dyn Fn(&RecordedRequest) + Send + Sync>;

#[derive(Default)]
struct State {
    responses: Vec<ScriptedResponse>,
    requests: Vec<RecordedRequest>,
    /// Requests recorded so far; the current one's number is its id seed.
    seq: u64,
    /// Connections accepted so far (clients that reuse theirs open few).
    connections: usize,
    /// `HEAD` requests answered (connections opened ahead; not recorded).
    heads: usize,
}

struct Shared {
    state: Mutex<State>,
    observer: Option<Observer>,
}

impl Shared {
    /// The state; a panic elsewhere while it was held leaves it usable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A scripted model server on a local port. Dropping it shuts it down:
/// the accept loop and every open connection end.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// Never sent on: dropping it (with the server) wakes every receiver,
    /// which is the shutdown signal.
    _shutdown: watch::Sender<()>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MockServer {
    /// Starts a server on 127.0.0.1 with a free port.
    pub async fn start(script: Script) -> std::io::Result<MockServer> {
        Self::start_on(script, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Starts a server on `addr`.
    pub async fn start_on(script: Script, addr: SocketAddr) -> std::io::Result<MockServer> {
        Self::start_with(script, addr, None).await
    }

    pub(crate) async fn start_with(
        script: Script,
        addr: SocketAddr,
        observer: Option<Observer>,
    ) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                responses: script.responses,
                ..State::default()
            }),
            observer,
        });
        let (shutdown, signal) = watch::channel(());
        tokio::spawn(accept_loop(listener, Arc::clone(&shared), signal));
        tracing::debug!(%addr, "mock model server listening");
        Ok(MockServer {
            addr,
            shared,
            _shutdown: shutdown,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests received so far, in order (not `/health` and
    /// `/__mock/requests`).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// How many connections clients have opened so far.
    pub fn connections(&self) -> usize {
        self.shared.lock().connections
    }

    /// `HEAD` requests answered: a client opening its connection ahead
    /// (they are not among [`MockServer::requests`]).
    pub fn heads(&self) -> usize {
        self.shared.lock().heads
    }

    /// Appends a response to the script.
    pub fn push(&self, response: ScriptedResponse) {
        self.shared.lock().responses.push(response);
    }

    /// How many non-repeating responses are still to be consumed.
    pub fn remaining(&self) -> usize {
        self.shared
            .lock()
            .responses
            .iter()
            .filter(|r| !r.repeat)
            .count()
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut signal: watch::Receiver<()>) {
    loop {
        let accepted = tokio::select! {
            _ = signal.changed() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: back off a little.
                tracing::warn!(error = %e, "mock: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        shared.lock().connections += 1;
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "mock: cannot set TCP_NODELAY");
        }
        let shared = Arc::clone(&shared);
        let mut signal = signal.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(handle(shared, req).await) }
            });
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                result = conn => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "mock: connection ended with an error");
                    }
                }
                _ = signal.changed() => {}
            }
        });
    }
    tracing::debug!("mock model server stopped");
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    // How Fettle opens a connection ahead of a completion: answered, not
    // recorded (scripts and tests count the model's requests).
    if req.method() == hyper::Method::HEAD {
        shared.lock().heads += 1;
        return Response::new(super::respond::full(bytes::Bytes::new()));
    }
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    match path.as_str() {
        "/health" => return json_response(StatusCode::OK, &json!({ "status": "ok" })),
        "/__mock/requests" => {
            let requests = shared.lock().requests.clone();
            let value = serde_json::to_value(requests).unwrap_or_else(|_| json!([]));
            return json_response(StatusCode::OK, &value);
        }
        _ => {}
    }
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in req.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_ascii_lowercase())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    let raw = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            tracing::warn!(error = %e, "mock: cannot read the request body");
            bytes::Bytes::new()
        }
    };
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let body: Value = serde_json::from_str(&raw).unwrap_or_else(|_| Value::String(raw.clone()));
    let recorded = RecordedRequest {
        method: method.clone(),
        path: path.clone(),
        headers,
        body: body.clone(),
    };
    if let Some(observer) = &shared.observer {
        observer(&recorded);
    }
    let Some(format) = Format::from_path(&path) else {
        shared.lock().requests.push(recorded);
        tracing::warn!(%method, %path, "mock: unknown endpoint");
        return json_response(
            StatusCode::NOT_FOUND,
            &json!({ "error": {
                "message": format!("mock: unknown endpoint {method} {path}"),
                "type": "not_found_error",
            }}),
        );
    };
    let (seq, picked) = {
        let mut state = shared.lock();
        state.requests.push(recorded);
        state.seq += 1;
        let seq = state.seq;
        let position = state
            .responses
            .iter()
            .position(|r| r.when.as_ref().is_none_or(|m| m.matches(&path, &raw)));
        let picked = position.map(|i| {
            if state.responses[i].repeat {
                state.responses[i].clone()
            } else {
                state.responses.remove(i)
            }
        });
        (seq, picked)
    };
    let Some(resp) = picked else {
        let message = format!("mock: no scripted response for {method} {path}");
        tracing::warn!("{message}");
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({ "error": { "message": message } }),
        );
    };
    let stream = format.is_stream(&body);
    tracing::debug!(seq, %method, %path, stream, fault = ?resp.fault, "mock: answering");
    answer(format, stream, resp, Ctx::new(seq, &body)).await
}

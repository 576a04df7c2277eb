//! A tower layer around tower-lsp's service that keeps two promises tower-lsp
//! does not: a panic inside a handler becomes an `InternalError` response
//! (the server stays up), and the process learns about `shutdown`/`exit` so it
//! can end with the exit code the spec asks for (0 after shutdown, 1 without).

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tower::Service;
use tower_lsp::jsonrpc::{Error, ErrorCode, Request, Response};
use tower_lsp::ExitedError;

/// What the process needs to know about the session's end.
#[derive(Default)]
pub struct Lifecycle {
    shutdown_requested: AtomicBool,
    /// Cancelled when the client sends `exit`.
    exited: CancellationToken,
}

impl Lifecycle {
    pub fn shutdown_requested(&self) -> bool {
        self.shutdown_requested.load(Ordering::SeqCst)
    }

    /// Resolves once the client has sent `exit`.
    pub async fn exited(&self) {
        self.exited.cancelled().await
    }

    /// The spec's exit code: 0 if `shutdown` came before the end, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.shutdown_requested() {
            0
        } else {
            1
        }
    }
}

pub struct Guarded<S> {
    inner: S,
    lifecycle: Arc<Lifecycle>,
}

impl<S> Guarded<S> {
    pub fn new(inner: S, lifecycle: Arc<Lifecycle>) -> Self {
        Self { inner, lifecycle }
    }
}

impl<S> Service<Request> for Guarded<S>
where
    S: Service<Request, Response = Option<Response>, Error = ExitedError>,
    S::Future: Send + 'static,
{
    type Response = Option<Response>;
    type Error = ExitedError;
    type Future = BoxFuture<'static, Result<Option<Response>, ExitedError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let req = super::params::normalize(req);
        let id = req.id().cloned();
        let method = req.method().to_owned();
        if let Some(answer) = refused(&method, id.as_ref()) {
            return futures::future::ready(Ok(answer)).boxed();
        }
        if method == "shutdown" {
            self.lifecycle
                .shutdown_requested
                .store(true, Ordering::SeqCst);
        }
        let lifecycle = self.lifecycle.clone();
        // Building the future can run handler code too, so it is guarded as well.
        let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(req))) {
            Ok(fut) => fut,
            Err(payload) => {
                return futures::future::ready(Ok(panic_response(id, &method, payload))).boxed()
            }
        };
        async move {
            let result = match AssertUnwindSafe(fut).catch_unwind().await {
                Ok(result) => result,
                Err(payload) => Ok(panic_response(id, &method, payload)),
            };
            if method == "exit" {
                // Stays cancelled, so a later waiter cannot miss it.
                lifecycle.exited.cancel();
            }
            if method == "initialize" {
                return result.map(|r| r.map(with_extra_capabilities));
            }
            result
        }
        .boxed()
    }
}

/// Messages tower-lsp would get wrong, answered here: `Some(answer)`.
///
/// - `shutdown` is a request; as a notification tower-lsp would still shut
///   the server down (every later request `-32600`), so it is ignored.
/// - A `$/` method sent as a request must get MethodNotFound (the spec);
///   tower-lsp drops every `$/` MethodNotFound, leaving the client waiting.
///   No `$/` method is a request, so none reaches the server as one.
fn refused(method: &str, id: Option<&tower_lsp::jsonrpc::Id>) -> Option<Option<Response>> {
    match id {
        None if method == "shutdown" => {
            tracing::warn!("ignored `shutdown` sent as a notification (it must be a request)");
            Some(None)
        }
        Some(id) if method.starts_with("$/") => {
            tracing::warn!(%method, "a `$/` method sent as a request: MethodNotFound");
            Some(Some(Response::from_error(
                id.clone(),
                Error {
                    code: ErrorCode::MethodNotFound,
                    message: format!("Method not found: {method} (`$/` methods are notifications)")
                        .into(),
                    data: None,
                },
            )))
        }
        _ => None,
    }
}

/// Adds the capabilities lsp-types cannot express to an `initialize` result.
fn with_extra_capabilities(response: Response) -> Response {
    let (id, body) = response.into_parts();
    let body = body.map(|mut result| {
        if let Some(caps) = result
            .get_mut("capabilities")
            .and_then(serde_json::Value::as_object_mut)
        {
            for (key, value) in super::lifecycle::extra_capabilities() {
                caps.insert(key.to_owned(), value);
            }
        }
        result
    });
    Response::from_parts(id, body)
}

fn panic_response(
    id: Option<tower_lsp::jsonrpc::Id>,
    method: &str,
    payload: Box<dyn Any + Send>,
) -> Option<Response> {
    let detail = crate::logging::panic_message(payload.as_ref());
    tracing::error!(%method, panic = %detail, "handler panicked; answering with InternalError");
    // Notifications have no id and get no response.
    id.map(|id| {
        Response::from_error(
            id,
            Error {
                code: ErrorCode::InternalError,
                message: format!("fettle: internal error while handling {method}: {detail}").into(),
                data: None,
            },
        )
    })
}

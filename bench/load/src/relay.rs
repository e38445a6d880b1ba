//! The do-nothing relay: an HTTP server that hands every request, bytes unchanged, to the mock
//! upstream with the same client stack agentd uses (reqwest on hyper, tokio's default two-worker
//! runtime) and streams the answer back. It parses nothing, stores nothing and logs nothing, so
//! its rate is the ceiling of any proxy in front of the mock on this box: what remains between
//! it and agentd is agentd's own work (the session, the provider, the store).

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;

#[derive(Clone)]
struct Upstream {
    client: reqwest::Client,
    base: String,
}

pub async fn serve(listen: &str, upstream: &str) -> std::io::Result<()> {
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(512)
        .build()
        .map_err(std::io::Error::other)?;
    let state = Upstream {
        client,
        base: format!("http://{upstream}"),
    };
    let app = Router::new().fallback(relay).with_state(state);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    eprintln!("bench relay listening on {listen}, upstream {upstream}");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await
}

async fn relay(
    State(upstream): State<Upstream>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = upstream
        .client
        .post(format!("{}{path}", upstream.base))
        .body(body);
    if let Some(content_type) = headers.get(header::CONTENT_TYPE) {
        request = request.header(header::CONTENT_TYPE, content_type);
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(error) => {
            return (StatusCode::BAD_GATEWAY, format!("upstream: {error}")).into_response();
        }
    };
    let status = answer.status();
    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
    let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    response
}

//! The web page (SPEC §10): `GET /` and `GET /ui/{file}` serve the chat and runs console, HTML,
//! CSS, an icon and one JavaScript bundle embedded in the binary (no CDN, no build at run time),
//! under a strict Content-Security-Policy that allows only these files and calls to this
//! server, so nothing a model writes can run. The bundle is built from `web/src` by
//! `web/build.mjs` (esbuild, with marked, DOMPurify and highlight.js from `web/`'s lockfile) and
//! checked in; a test rebuilds it and fails when it differs. The page speaks only the public
//! API; two calls exist for it: `POST /v1/markdown` renders Markdown on the server with
//! `pulldown-cmark` and `ammonia` for API clients, bounded in size, nesting and time and off
//! the async workers ([`markdown`]), and `GET /v1/me` says who the caller is. With `pageClientId`
//! the page signs in itself (`web/src/signin.js`, the `signin` hook); its policy then lets it
//! call the issuer's token endpoint.

pub mod markdown;

use axum::extract::Extension;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ApiJson, ApiPath, ErrorBody};

/// Only this page's own files and calls to this server; no inline script or style. Images may
/// also be `blob:` URLs: the thumbnails the page makes of files it fetched through the Files API.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self' data: blob:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The largest Markdown text `POST /v1/markdown` renders, in bytes.
pub const MAX_MARKDOWN_BYTES: usize = 256 * 1024;

const INDEX_HTML: &str = include_str!("assets/index.html");

/// The page's files, by the name `/ui/{file}` serves them under.
const ASSETS: [(&str, &str, &str); 3] = [
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("assets/app.css"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("assets/favicon.svg"),
    ),
];

fn with_page_headers(mut response: Response, content_type: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[utoipa::path(
    get,
    path = "/",
    tag = "web",
    summary = "The web chat and runs console",
    responses((status = 200, description = "The page", content_type = "text/html", body = String)),
)]
pub async fn page(
    Extension(auth): Extension<std::sync::Arc<crate::http::identity::Authenticator>>,
) -> Response {
    let mut response = with_page_headers(INDEX_HTML.into_response(), "text/html; charset=utf-8");
    let issuers = crate::http::identity::well_known::page_connect_origins(auth.issuers());
    if !issuers.is_empty() {
        // Sign-in (web/src/signin.js) exchanges its code at the issuer's token endpoint.
        let policy = CONTENT_SECURITY_POLICY.replace(
            "connect-src 'self'",
            &format!("connect-src 'self' {}", issuers.join(" ")),
        );
        if let Ok(value) = HeaderValue::from_str(&policy) {
            response
                .headers_mut()
                .insert(header::CONTENT_SECURITY_POLICY, value);
        }
    }
    response
}

/// The `{file}` of `/ui/{file}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct AssetPath {
    /// `app.js`, `app.css` or `favicon.svg`.
    #[param(pattern = r"^(app\.(js|css)|favicon\.svg)$")]
    pub file: String,
}

#[utoipa::path(
    get,
    path = "/ui/{file}",
    tag = "web",
    summary = "One of the page's files",
    params(AssetPath),
    responses(
        (status = 200, description = "The file", content(
            (String = "text/javascript"),
            (String = "text/css"),
            (String = "image/svg+xml"),
        )),
        ErrorBody,
    ),
)]
pub async fn asset(ApiPath(AssetPath { file }): ApiPath<AssetPath>) -> Result<Response, ApiError> {
    let (_, content_type, body) = ASSETS
        .iter()
        .find(|(name, _, _)| *name == file)
        .ok_or_else(|| ApiError::not_found(format!("The page has no file `{file}`")))?;
    Ok(with_page_headers(body.into_response(), content_type))
}

/// `POST /v1/markdown`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkdownRequest {
    /// Markdown, at most 256 KiB.
    pub text: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MarkdownAnswer {
    /// The rendered HTML, cleaned: no script, event handler or unsafe URL survives.
    pub html: String,
}

#[utoipa::path(
    post,
    path = "/v1/markdown",
    tag = "web",
    summary = "Render Markdown to safe HTML (the page shows finished answers with it)",
    request_body = MarkdownRequest,
    responses(
        (status = 200, description = "The HTML", body = MarkdownAnswer),
        ErrorBody,
    ),
)]
pub async fn markdown(
    ApiJson(request): ApiJson<MarkdownRequest>,
) -> Result<axum::Json<MarkdownAnswer>, ApiError> {
    if request.text.len() > MAX_MARKDOWN_BYTES {
        return Err(ApiError::invalid_request(format!(
            "`text` is {} bytes; at most {MAX_MARKDOWN_BYTES} are rendered",
            request.text.len()
        ))
        .with_param("text"));
    }
    match markdown::render_bounded(request.text).await {
        Ok(html) => Ok(axum::Json(MarkdownAnswer { html })),
        Err(error @ markdown::RenderError::TooDeep { .. }) => {
            Err(ApiError::invalid_request(error.to_string()).with_param("text"))
        }
        Err(error) => Err(ApiError::overloaded(error.to_string(), Some(1))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_keeps_formatting_and_shows_model_html_as_text() {
        let html = markdown::render_markdown(
            "**bold** <img src=x onerror=alert(1)> <script>alert(2)</script> [a](javascript:alert(3))",
        );
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(
            html.contains("&lt;script&gt;"),
            "markup shows as text: {html}"
        );
        assert!(
            !html.contains("<script") && !html.contains("<img") && !html.contains("javascript:"),
            "{html}"
        );
    }

    #[test]
    fn every_asset_is_embedded() {
        assert!(INDEX_HTML.contains("/ui/app.js"));
        assert!(ASSETS.iter().all(|(_, _, body)| !body.is_empty()));
    }
}

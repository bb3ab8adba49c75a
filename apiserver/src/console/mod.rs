//! The fleet console at `/ui/`: pages served by the hub, filled by a small script from the
//! hub's own API as the signed-in user, and kept current from watches.
//!
//! A user signs in with a bearer token (`session.rs`); every read and action after that is an
//! API call made with that token through the REST layer's one entry point (`user.rs`), so RBAC
//! decides what the console shows and does, exactly as for kubectl. The browser reaches the
//! API only through `/ui/api/` (reads, watches) and `/ui/actions/` (the few writes), both
//! answering only the console's own pages (`guard.rs`). This folder is the top layer: it
//! uses `serve` (the REST entry point) and `cli` (the client commands its actions share with
//! `ocm-hub`); `serve` mounts it through `ServeConfig::routes`, set by `main.rs`.

mod actions;
mod guard;
mod pages;
mod session;
mod user;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::any;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};

use crate::serve::rest::ApiState;
use pages::Page;
use session::{Session, Sessions};
use user::Call;

/// The largest sign-in or sign-out form.
const MAX_FORM_BYTES: usize = 16 * 1024;
/// The group every bootstrap token's user is in: such tokens join clusters and never sign in.
const BOOTSTRAPPERS: &str = crate::auth::authn::BOOTSTRAPPERS_GROUP;

/// The console of one hub replica.
#[derive(Debug)]
struct Console {
    api: Arc<ApiState>,
    sessions: Sessions,
}

/// The console's routes, served beside the API on the hub's HTTPS port.
pub fn routes(state: &Arc<ApiState>) -> axum::Router {
    let console = Arc::new(Console { api: Arc::clone(state), sessions: Sessions::default() });
    axum::Router::new()
        .route("/ui", any(handle))
        .route("/ui/", any(handle))
        .route("/ui/{*rest}", any(handle))
        .with_state(console)
}

async fn handle(State(console): State<Arc<Console>>, req: Request) -> Response {
    pages::secure(route(&console, req).await)
}

async fn route(console: &Arc<Console>, req: Request) -> Response {
    let path = req.uri().path().to_owned();
    let Some(rest) = path.strip_prefix("/ui/") else {
        return pages::see_other("/ui/", None);
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let method = req.method().clone();
    match (&method, segments.as_slice()) {
        (&Method::GET, ["static", file]) => pages::asset(file).unwrap_or_else(not_found),
        (&Method::GET, ["login"]) => match console.sessions.of(req.headers()) {
            Some(_) => pages::see_other("/ui/", None),
            None => pages::sign_in(StatusCode::OK, None),
        },
        (&Method::POST, ["login"]) => sign_in(console, req).await,
        (&Method::POST, ["logout"]) => sign_out(console, req).await,
        (_, ["api", ..]) => read(console, req).await,
        (&Method::POST, ["actions", action @ ..]) => act(console, req, action).await,
        (&Method::GET, page) => match Page::of(page) {
            Some(page) => match console.sessions.of(req.headers()) {
                Some(session) => pages::shell(&page, &session),
                None => pages::see_other("/ui/login", None),
            },
            None => not_found(),
        },
        _ => status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "not allowed here"),
    }
}

fn not_found() -> Response {
    status(StatusCode::NOT_FOUND, "NotFound", "the console has no such page")
}

/// A `Status` answer of the console itself.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::from(body.to_string()))
        .expect("static headers are valid")
}

/// A request the console refuses, and the `Status` it answers.
#[derive(Debug)]
struct Refused(StatusCode, &'static str, &'static str);

impl Refused {
    fn response(self) -> Response {
        let Refused(code, reason, message) = self;
        status(code, reason, message)
    }
}

fn authority(req: &Request) -> Option<&str> {
    req.uri().authority().map(http::uri::Authority::as_str)
}

/// The signed-in session of a request that also comes from this console's pages.
fn session_of(console: &Console, req: &Request, write: bool) -> Result<Arc<Session>, Refused> {
    let checked = if write {
        guard::same_origin_write(req.headers(), authority(req))
    } else {
        guard::same_origin_read(req.headers(), authority(req))
    };
    if let Err(guard::CrossOrigin(why)) = checked {
        return Err(Refused(StatusCode::FORBIDDEN, "Forbidden", why));
    }
    console.sessions.of(req.headers()).ok_or(Refused(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        "sign in first",
    ))
}

/// `/ui/api/<API path>`: a read or watch of the API as the session's user. Only reads of
/// `/api` and `/apis` pass, by a path with no empty, `.` or `..` segment, never the cluster
/// proxy; a 401 from the API (the token expired or
/// was revoked) ends the session.
async fn read(console: &Arc<Console>, req: Request) -> Response {
    let session = match session_of(console, &req, false) {
        Ok(s) => s,
        Err(refused) => return refused.response(),
    };
    if req.method() != Method::GET {
        return status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the console reads here",
        );
    }
    let Some(api_path) = req.uri().path().strip_prefix("/ui/api") else { return not_found() };
    let plain = api_path.split('/').skip(1).all(|s| !matches!(s, "" | "." | ".."));
    let readable = plain
        && (api_path.starts_with("/api/") || api_path.starts_with("/apis/"))
        && !crate::serve::rest::is_proxy_path(api_path);
    if !readable {
        return not_found();
    }
    let path = match req.uri().query() {
        Some(q) => format!("{api_path}?{q}"),
        None => api_path.to_owned(),
    };
    let call = Call {
        accept: req.headers().get(header::ACCEPT).cloned(),
        accept_encoding: req.headers().get(header::ACCEPT_ENCODING).cloned(),
        ..Call::get(&path)
    };
    let mut resp = user::call(&console.api, &session.token, call).await;
    if resp.status() == StatusCode::UNAUTHORIZED {
        console.sessions.end_token(&session.token);
    }
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// `/ui/actions/...`: an action as the session's user, with the session's token in
/// `X-CSRF-Token`.
async fn act(console: &Arc<Console>, req: Request, action: &[&str]) -> Response {
    let session = match session_of(console, &req, true) {
        Ok(s) => s,
        Err(refused) => return refused.response(),
    };
    let given = req.headers().get(guard::CSRF_HEADER).and_then(|v| v.to_str().ok());
    if let Err(guard::CrossOrigin(why)) = guard::csrf_matches(&session, given) {
        return status(StatusCode::FORBIDDEN, "Forbidden", why);
    }
    drop(req);
    match actions::Action::of(action) {
        Some(action) => actions::run(&console.api, &session.token, action).await,
        None => not_found(),
    }
}

/// A form's fields, read whole within [`MAX_FORM_BYTES`].
async fn form(req: Request) -> Result<Vec<(String, String)>, Refused> {
    let limited = http_body_util::Limited::new(req.into_body(), MAX_FORM_BYTES);
    let bytes = match limited.collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return Err(Refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                "form too large",
            ));
        }
    };
    Ok(form_urlencoded::parse(&bytes).into_owned().collect())
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// `POST /ui/login`: the token is asked who it names (a SelfSubjectReview as that token); a
/// token the hub refuses, and a bootstrap token, do not sign in.
async fn sign_in(console: &Arc<Console>, req: Request) -> Response {
    if let Err(guard::CrossOrigin(why)) = guard::same_origin_write(req.headers(), authority(&req)) {
        return status(StatusCode::FORBIDDEN, "Forbidden", why);
    }
    let fields = match form(req).await {
        Ok(f) => f,
        Err(refused) => return refused.response(),
    };
    let token = field(&fields, "token").unwrap_or("").trim();
    if token.is_empty() {
        return pages::sign_in(StatusCode::BAD_REQUEST, Some("Paste a bearer token."));
    }
    let user = match who(&console.api, token).await {
        Ok(user) => user,
        Err(why) => return pages::sign_in(StatusCode::UNAUTHORIZED, Some(&why)),
    };
    let (id, _) = console.sessions.start(token, user);
    pages::see_other("/ui/", Some(session::set_cookie(&id)))
}

/// The user `token` names, or why it may not sign in.
async fn who(api: &Arc<ApiState>, token: &str) -> Result<String, String> {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let call = Call {
        method: Method::POST,
        content_type: Some("application/json"),
        body: Body::from(review.to_string()),
        ..Call::get("/apis/authentication.k8s.io/v1/selfsubjectreviews")
    };
    let resp = user::call(api, token, call).await;
    let code = resp.status();
    if code == StatusCode::UNAUTHORIZED {
        return Err("The hub does not accept this token.".into());
    }
    // Authenticated, though not allowed to ask who it is: signed in under no name.
    if code == StatusCode::FORBIDDEN {
        return Ok(String::new());
    }
    let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
    if !code.is_success() {
        let message = review["message"].as_str().unwrap_or("the hub could not check the token");
        return Err(format!("The hub could not check this token: {message}"));
    }
    let info = &review["status"]["userInfo"];
    let groups = info["groups"].as_array().into_iter().flatten();
    if groups.filter_map(Value::as_str).any(|g| g == BOOTSTRAPPERS) {
        return Err("A bootstrap token joins clusters; it cannot sign in. Use a service \
                    account's token (kubectl create token NAME -n NAMESPACE)."
            .into());
    }
    Ok(info["username"].as_str().unwrap_or_default().to_owned())
}

/// `POST /ui/logout`: ends the session (its token in the form's `csrf` field).
async fn sign_out(console: &Arc<Console>, req: Request) -> Response {
    let session = match session_of(console, &req, true) {
        Ok(s) => s,
        Err(_) => return pages::see_other("/ui/login", Some(session::clear_cookie())),
    };
    let headers = req.headers().clone();
    let fields = match form(req).await {
        Ok(f) => f,
        Err(refused) => return refused.response(),
    };
    if let Err(guard::CrossOrigin(why)) = guard::csrf_matches(&session, field(&fields, "csrf")) {
        return status(StatusCode::FORBIDDEN, "Forbidden", why);
    }
    console.sessions.end(&headers);
    pages::see_other("/ui/login", Some(session::clear_cookie()))
}

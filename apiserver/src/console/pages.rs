//! The console's HTML: the sign-in page and one shell per page, which the console's script
//! fills from the API (as the signed-in user) and keeps current from watches. Every value
//! written into HTML is escaped; the pages carry no inline script or style, so the content
//! security policy ([`CSP`]) can forbid both.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

use super::session::Session;

/// The content security policy of every console answer: scripts, styles and data from this
/// origin only, nothing inline, no framing, forms posting only here.
pub(super) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
    base-uri 'none'";

/// The console's script.
const SCRIPT: &str = include_str!("assets/console.js");
/// The console's style sheet.
const STYLE: &str = include_str!("assets/console.css");

/// A console page: which one, and the object it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Page {
    /// The fleet: a tile per cluster and the clusters' table.
    Fleet,
    /// One cluster: conditions, taints, claims, capacity, works, add-ons, policies.
    Cluster(String),
    /// Every placement.
    Placements,
    /// One placement: its decisions and the `explain` table.
    Placement(String, String),
    /// Every ManifestWorkReplicaSet.
    Rollouts,
    /// One ManifestWorkReplicaSet: per-cluster progress and revisions.
    Rollout(String, String),
    /// Add-ons across the fleet.
    Addons,
    /// Policy compliance: clusters × policies.
    Policies,
}

impl Page {
    /// The page a path under `/ui/` names (segments after `/ui/`), if any.
    pub(super) fn of(segments: &[&str]) -> Option<Page> {
        let name = |s: &str| crate::machinery::object::check_dns_subdomain(s).is_ok();
        Some(match segments {
            [] | [""] => Page::Fleet,
            ["clusters", c] if name(c) => Page::Cluster((*c).to_owned()),
            ["placements"] => Page::Placements,
            ["placements", ns, n] if name(ns) && name(n) => {
                Page::Placement((*ns).to_owned(), (*n).to_owned())
            }
            ["rollouts"] => Page::Rollouts,
            ["rollouts", ns, n] if name(ns) && name(n) => {
                Page::Rollout((*ns).to_owned(), (*n).to_owned())
            }
            ["addons"] => Page::Addons,
            ["policies"] => Page::Policies,
            _ => return None,
        })
    }

    /// The name the script knows the page by, its namespace and name, and its title.
    fn parts(&self) -> (&'static str, &str, &str, String) {
        match self {
            Page::Fleet => ("fleet", "", "", "Fleet".into()),
            Page::Cluster(c) => ("cluster", "", c, format!("Cluster {c}")),
            Page::Placements => ("placements", "", "", "Placements".into()),
            Page::Placement(ns, n) => ("placement", ns, n, format!("Placement {ns}/{n}")),
            Page::Rollouts => ("rollouts", "", "", "Rollouts".into()),
            Page::Rollout(ns, n) => ("rollout", ns, n, format!("Rollout {ns}/{n}")),
            Page::Addons => ("addons", "", "", "Add-ons".into()),
            Page::Policies => ("policies", "", "", "Policies".into()),
        }
    }
}

/// `s` with the characters HTML gives meaning to escaped (text and quoted attributes).
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The pages every shell links to.
const NAV: [(&str, &str); 5] = [
    ("/ui/", "Fleet"),
    ("/ui/placements", "Placements"),
    ("/ui/rollouts", "Rollouts"),
    ("/ui/addons", "Add-ons"),
    ("/ui/policies", "Policies"),
];

/// A page's shell for the signed-in `session`.
pub(super) fn shell(page: &Page, session: &Session) -> Response {
    let (script_name, ns, name, title) = page.parts();
    let nav: String =
        NAV.iter().map(|(href, label)| format!(r#"<a href="{href}">{label}</a>"#)).collect();
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{csrf}">
<title>{title} · OCM hub</title>
<link rel="stylesheet" href="/ui/static/console.css">
<script src="/ui/static/console.js" defer></script>
</head>
<body data-page="{script_name}" data-namespace="{ns}" data-name="{name}">
<header><a class="brand" href="/ui/">OCM hub</a><nav>{nav}</nav>
<span class="live" id="live" title="live updates">●</span>
<span class="user" id="user">{user}</span>
<form method="post" action="/ui/logout"><input type="hidden" name="csrf" value="{csrf}"><button type="submit">Sign out</button></form>
</header>
<main id="main"><h1>{title}</h1><p class="muted">Loading…</p></main>
</body></html>
"#,
        csrf = escape(&session.csrf),
        title = escape(&title),
        ns = escape(ns),
        name = escape(name),
        user = escape(&session.user),
    );
    html_response(StatusCode::OK, html)
}

/// The sign-in page, with `error` said above the form.
pub(super) fn sign_in(code: StatusCode, error: Option<&str>) -> Response {
    let error = error
        .map(|e| format!(r#"<p class="error" id="error">{}</p>"#, escape(e)))
        .unwrap_or_default();
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · OCM hub</title>
<link rel="stylesheet" href="/ui/static/console.css">
</head>
<body class="signin">
<main><h1>OCM hub</h1>
{error}<form method="post" action="/ui/login">
<label for="token">Bearer token</label>
<input type="password" id="token" name="token" autocomplete="off" required autofocus>
<p class="muted">A service account's token, as <code>kubectl create token NAME -n NAMESPACE</code> prints it. The console shows what this token may read, and acts only as it may.</p>
<button type="submit" id="signin">Sign in</button>
</form></main>
</body></html>
"#
    );
    html_response(code, html)
}

fn html_response(code: StatusCode, html: String) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::from(html))
        .expect("static headers are valid")
}

/// A static asset by file name.
pub(super) fn asset(file: &str) -> Option<Response> {
    let (body, media) = match file {
        "console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "console.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return None,
    };
    Some(
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, media)
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from(body))
            .expect("static headers are valid"),
    )
}

/// Adds the headers every console answer carries: the content security policy, no sniffing,
/// no framing, referrers only within this origin.
pub(super) fn secure(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser names its own forms'
    // origin `null`, and the guard could no longer tell them from another site's.
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    resp
}

/// A 303 to `to`, perhaps setting a cookie.
pub(super) fn see_other(to: &str, cookie: Option<String>) -> Response {
    let mut resp = Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(header::LOCATION, to)
        .header(header::CACHE_CONTROL, "no-store");
    if let Some(cookie) = cookie {
        resp = resp.header(header::SET_COOKIE, cookie);
    }
    resp.body(Body::empty()).expect("static headers are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_pages_and_nothing_else() {
        assert_eq!(Page::of(&[""]), Some(Page::Fleet));
        assert_eq!(Page::of(&["clusters", "c1"]), Some(Page::Cluster("c1".into())));
        assert_eq!(Page::of(&["clusters", "C<1"]), None);
        assert_eq!(
            Page::of(&["rollouts", "ns", "app"]),
            Some(Page::Rollout("ns".into(), "app".into()))
        );
        assert_eq!(Page::of(&["placements", "ns"]), None);
        assert_eq!(Page::of(&["secrets"]), None);
    }

    #[test]
    fn html_is_escaped() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn the_policy_forbids_inline_and_foreign_scripts() {
        assert!(CSP.contains("script-src 'self';"));
        assert!(!CSP.contains("unsafe-inline"));
        assert!(CSP.contains("frame-ancestors 'none'"));
    }
}

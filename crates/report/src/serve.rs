//! `kevo serve`: the runs of a store in the browser. The run list and each
//! run's report (the same page as `kevo report`), kept current by polling:
//! every 2 s a page asks for a small version string (proposals stored,
//! status) and, only when it changed, fetches the page again and swaps
//! its sections. The server only reads the store (SQLite in WAL mode lets
//! a running search write meanwhile; PostgreSQL the same), so a watched
//! search is neither blocked nor slowed beyond those reads.

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use kevo_store::{RunId, Store, Target};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::embed::json_for_html;
use crate::html::{RenderOptions, render_report_with};
use crate::svg::{escape, number};
use crate::{ReportError, RunData};

/// How often an open page asks whether its run changed.
pub const POLL_MS: u32 = 2000;

/// The store the pages read. A workspace without a store is watched, not
/// created: its list shows no runs until `kevo evolve` makes the store,
/// which the next request then opens (`kevo serve` may start first).
pub enum Source {
    Open(Store),
    Workspace(PathBuf),
}

struct Shared {
    source: Source,
    opened: OnceCell<Store>,
}

impl Shared {
    /// The store, or None while the watched workspace has none.
    async fn store(&self) -> Result<Option<&Store>, ReportError> {
        let workspace = match &self.source {
            Source::Open(store) => return Ok(Some(store)),
            Source::Workspace(workspace) => workspace,
        };
        if let Some(store) = self.opened.get() {
            return Ok(Some(store));
        }
        let present = match Target::default_for(workspace) {
            Target::Sqlite(path) => path.is_file(),
            Target::Postgres(_) => true,
        };
        if !present {
            return Ok(None);
        }
        let store = self
            .opened
            .get_or_try_init(|| Store::open_workspace(workspace))
            .await?;
        Ok(Some(store))
    }
}

type Served = State<Arc<Shared>>;

/// The dashboard's routes over `source`.
pub fn router(source: Source) -> Router {
    Router::new()
        .route("/", get(run_list))
        .route("/runs/{id}", get(run_page))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/api/runs", get(api_runs))
        .route("/api/runs/version", get(api_list_version))
        .route("/api/runs/{id}/version", get(api_version))
        .with_state(Arc::new(Shared {
            source,
            opened: OnceCell::new(),
        }))
}

/// Serve until the process ends.
pub async fn serve(source: Source, addr: SocketAddr) -> Result<(), ReportError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|cause| ReportError::Bind { addr, cause })?;
    axum::serve(listener, router(source))
        .await
        .map_err(|cause| ReportError::Bind { addr, cause })
}

fn error_page(status: StatusCode, message: &str) -> Response {
    (
        status,
        Html(format!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kevo</title></head><body><p>{}</p><p><a href=\"/\">all runs</a></p></body></html>",
            escape(message)
        )),
    )
        .into_response()
}

/// The script that keeps a page current: `version_url` answers
/// `{"version": ...}`; on a change the page at `location` is fetched
/// again and every `<section id>` (and the embedded data) replaced.
/// `document.body.dataset.updates` counts the swaps.
fn live_script(version_url: &str, version: &str) -> String {
    // JavaScript string literals that no markup can close or comment out.
    let url = json_for_html(version_url);
    let version = json_for_html(version);
    format!(
        r#"<script>
(function () {{
  var version = {version};
  var updates = 0;
  document.body.dataset.updates = "0";
  function swap(text) {{
    var doc = new DOMParser().parseFromString(text, "text/html");
    doc.querySelectorAll("section[id], script#kevo-report-data").forEach(function (fresh) {{
      var old = document.getElementById(fresh.id);
      if (old) {{ old.replaceWith(fresh); }} else if (fresh.tagName === "SECTION") {{ document.body.appendChild(fresh); }}
    }});
  }}
  function tick() {{
    fetch({url}, {{ cache: "no-store" }})
      .then(function (r) {{ return r.ok ? r.json() : null; }})
      .then(function (v) {{
        if (!v || v.version === version) {{ return null; }}
        return fetch(location.pathname, {{ cache: "no-store" }})
          .then(function (r) {{ return r.text(); }})
          .then(function (text) {{
            swap(text);
            version = v.version;
            updates += 1;
            document.body.dataset.updates = String(updates);
          }});
      }})
      .catch(function () {{ /* the server is gone: keep what is shown */ }})
      .then(function () {{ setTimeout(tick, {POLL_MS}); }});
  }}
  setTimeout(tick, {POLL_MS});
}})();
</script>"#
    )
}

async fn run_version(store: &Store, id: &RunId) -> Result<String, ReportError> {
    let info = store.run(id).await?;
    let history = store.history(id).await?;
    Ok(format!("{}:{}", history.len(), info.status.as_str()))
}

/// The list's version: empty while the workspace has no store.
async fn list_version(shared: &Shared) -> Result<String, ReportError> {
    let Some(store) = shared.store().await? else {
        return Ok(String::new());
    };
    let runs = store.list_runs().await?;
    Ok(runs
        .iter()
        .map(|r| {
            format!(
                "{}:{}:{}",
                r.id.0,
                r.status.as_str(),
                r.last_iteration.unwrap_or(0)
            )
        })
        .collect::<Vec<_>>()
        .join(","))
}

async fn run_list(State(shared): Served) -> Response {
    let runs = match shared.store().await {
        Ok(Some(store)) => store.list_runs().await.map_err(ReportError::from),
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    let runs = match runs {
        Ok(r) => r,
        Err(e) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let version = list_version(&shared).await.unwrap_or_default();
    let now = chrono::Utc::now();
    let mut page = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kevo runs</title><style>",
    );
    page.push_str(include_str!("report.css"));
    page.push_str("</style></head><body><h1>kevo runs</h1><section id=\"runs\"><table><tr><th>run</th><th>task</th><th>strategy</th><th>device</th><th>status</th><th>iteration</th><th>winner's score</th><th>confirmed speedup</th><th>held-out verdict</th><th>cost (USD)</th><th>started</th></tr>");
    for r in &runs {
        let status = if r.status.as_str() == "running" && !r.is_alive(now) {
            "dead"
        } else {
            r.status.as_str()
        };
        let _ = write!(
            page,
            "<tr class=\"run\" data-run=\"{id}\"><td><a href=\"/runs/{id}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{status}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.task),
            escape(&r.strategy),
            escape(&r.device),
            r.last_iteration
                .map(|i| i.to_string())
                .unwrap_or_else(|| "–".into()),
            r.best_score
                .map(|b| format!("{} <small>{}</small>", number(b), r.best_score_measure))
                .unwrap_or_else(|| "–".into()),
            r.speedup
                .map(|x| format!("{x:.2}x"))
                .unwrap_or_else(|| "–".into()),
            escape(r.held_out_verdict.as_deref().unwrap_or("–")),
            r.cost_usd
                .map(|c| format!("{c:.4}"))
                .unwrap_or_else(|| "–".into()),
            r.created_at.format("%Y-%m-%d %H:%M UTC"),
            id = escape(&r.id.0),
        );
    }
    if runs.is_empty() {
        page.push_str("<tr><td colspan=\"11\">No runs here yet: the list fills in when a run starts.</td></tr>");
    }
    page.push_str("</table></section>");
    page.push_str(&live_script("/api/runs/version", &version));
    page.push_str("</body></html>\n");
    Html(page).into_response()
}

async fn run_page(State(shared): Served, Path(id): Path<String>) -> Response {
    let run = RunId(id.clone());
    let store = match shared.store().await {
        Ok(Some(store)) => store,
        Ok(None) => {
            return error_page(StatusCode::NOT_FOUND, &format!("no run {id}: no store yet"));
        }
        Err(e) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let data = match RunData::gather(store, &run).await {
        Ok(d) => d,
        Err(ReportError::Store(kevo_store::StoreError::RunNotFound(_))) => {
            return error_page(StatusCode::NOT_FOUND, &format!("no run {id} in this store"));
        }
        Err(e) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let version = run_version(store, &run).await.unwrap_or_default();
    let options = RenderOptions {
        tail: live_script(&format!("/api/runs/{}/version", encode(&id)), &version),
        home: Some("/".into()),
    };
    Html(render_report_with(&data, &options)).into_response()
}

/// Percent-encoding of a path segment (run ids are plain, but a store may
/// hold anything).
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn api_runs(State(shared): Served) -> Response {
    let runs = match shared.store().await {
        Ok(Some(store)) => store.list_runs().await.map_err(ReportError::from),
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    match runs {
        Ok(runs) => (
            [(header::CACHE_CONTROL, "no-store")],
            axum::Json(json!(runs)),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn api_list_version(State(shared): Served) -> Response {
    version_response(list_version(&shared).await, "")
}

async fn api_version(State(shared): Served, Path(id): Path<String>) -> Response {
    let version = match shared.store().await {
        Ok(Some(store)) => run_version(store, &RunId(id.clone())).await,
        Ok(None) => Err(ReportError::Store(kevo_store::StoreError::RunNotFound(
            RunId(id.clone()),
        ))),
        Err(e) => Err(e),
    };
    version_response(version, &id)
}

fn version_response(version: Result<String, ReportError>, id: &str) -> Response {
    match version {
        Ok(v) => (
            [(header::CACHE_CONTROL, "no-store")],
            axum::Json(json!({ "version": v })),
        )
            .into_response(),
        Err(ReportError::Store(kevo_store::StoreError::RunNotFound(_))) => {
            (StatusCode::NOT_FOUND, format!("no run {id}")).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_script_holds_no_markup_whatever_it_embeds() {
        let script = live_script("/api/runs/x</script>/version", "<!--<script>\u{2028}");
        assert_eq!(script.matches("<script").count(), 1, "{script}");
        assert_eq!(script.matches("</script>").count(), 1, "{script}");
        assert!(script.ends_with("</script>"));
        assert!(!script.contains("<!--") && !script.contains('\u{2028}'));
        assert!(script.contains(r#"var version = "\u003c!--\u003cscript\u003e\u2028";"#));
    }
}

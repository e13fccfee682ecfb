//! One-line progress notices from the provider layer: a retry and its
//! wait, a refused `Retry-After`, a `cmd:` proposer that left processes
//! behind. A run can wait minutes on a flaky endpoint; the user should see
//! why. The CLI installs a sink that prints to stderr; without one the
//! notices go to `tracing` at warn level. Notices are redacted before they
//! get here, and cleaned of control characters here (they quote errors an
//! endpoint wrote).

use std::sync::{Arc, OnceLock, RwLock};

type Sink = Arc<dyn Fn(&str) + Send + Sync>;

fn sink() -> &'static RwLock<Option<Sink>> {
    static SINK: OnceLock<RwLock<Option<Sink>>> = OnceLock::new();
    SINK.get_or_init(|| RwLock::new(None))
}

/// Send every later notice to `f` (process-wide; the last call wins).
pub fn set_sink(f: impl Fn(&str) + Send + Sync + 'static) {
    *sink().write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(f));
}

pub fn notice(line: &str) {
    let line = &crate::sanitize::text(line);
    let current = sink().read().unwrap_or_else(|e| e.into_inner()).clone();
    match current {
        Some(f) => f(line),
        None => tracing::warn!("{line}"),
    }
}

//! Where a store lives, parsed from what a user typed, and how to name it in
//! messages without leaking a password.

use std::path::{Path, PathBuf};

use crate::StoreError;

/// The database behind a [`crate::Store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A SQLite file, created if missing.
    Sqlite(PathBuf),
    /// A PostgreSQL server, as a `postgres://` or `postgresql://` URL.
    Postgres(String),
}

impl Target {
    /// Reads `postgres://…` / `postgresql://…` as a server URL,
    /// `sqlite://path` / `sqlite:path` as a file, and anything without a
    /// scheme as a file path. Other schemes are rejected rather than taken
    /// for odd file names.
    pub fn parse(spec: &str) -> Result<Target, StoreError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(StoreError::InvalidTarget {
                target: String::new(),
                reason: "empty database location".into(),
            });
        }
        if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            return Ok(Target::Postgres(spec.to_string()));
        }
        if let Some(rest) = spec
            .strip_prefix("sqlite://")
            .or_else(|| spec.strip_prefix("sqlite:"))
        {
            if rest.contains('?') {
                return Err(StoreError::InvalidTarget {
                    target: redact_url(spec),
                    reason: "SQLite URL parameters are not supported; kevo sets the options itself"
                        .into(),
                });
            }
            if rest.is_empty() || rest == ":memory:" {
                return Err(StoreError::InvalidTarget {
                    target: spec.to_string(),
                    reason: "a run store must be a file (an in-memory database would lose the run)"
                        .into(),
                });
            }
            return Ok(Target::Sqlite(PathBuf::from(rest)));
        }
        if let Some(idx) = spec.find("://") {
            return Err(StoreError::InvalidTarget {
                target: redact_url(spec),
                reason: format!(
                    "unsupported scheme `{}` (expected postgres://, sqlite: or a file path)",
                    &spec[..idx]
                ),
            });
        }
        Ok(Target::Sqlite(PathBuf::from(spec)))
    }

    /// A name safe to print: the file path, or the URL with its password
    /// replaced by `***`.
    pub fn display(&self) -> String {
        match self {
            Target::Sqlite(p) => p.display().to_string(),
            Target::Postgres(url) => redact_url(url),
        }
    }

    /// The default store of a workspace: `<workspace>/kevo.db`, beside its
    /// `runs/` folder. Workspaces written before this layout keep their
    /// store at `<workspace>/.kevo/kevo.db` (with the default workspace
    /// `.kevo`, a doubled `.kevo/.kevo/kevo.db`): such a file is used while
    /// no new one exists, so nothing stored is lost.
    pub fn default_for(workspace: &Path) -> Target {
        let store = workspace.join("kevo.db");
        let earlier = workspace.join(".kevo").join("kevo.db");
        if !store.exists() && earlier.is_file() {
            return Target::Sqlite(earlier);
        }
        Target::Sqlite(store)
    }
}

/// Replaces the password in a URL (user info and `password=` query
/// parameters) with `***`, so that errors and logs can name the server.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let after = scheme_end + 3;
    let rest = &url[after..];
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..after]);
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let tail = &rest[auth_end..];
    match tail.find('?') {
        Some(q) => {
            out.push_str(&tail[..=q]);
            let (query, fragment) = match tail[q + 1..].find('#') {
                Some(h) => tail[q + 1..].split_at(h),
                None => (&tail[q + 1..], ""),
            };
            let params: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if is_secret_key(k) => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
            out.push_str(fragment);
        }
        None => out.push_str(tail),
    }
    out
}

fn is_secret_key(key: &str) -> bool {
    ["password", "sslpassword", "pass"]
        .iter()
        .any(|s| key.eq_ignore_ascii_case(s))
}

/// The secrets a URL carries, raw and percent-decoded, so that messages
/// coming back from the driver can be scrubbed of them too.
pub(crate) fn url_secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..auth_end];
        if let Some(at) = authority.rfind('@')
            && let Some((_, pw)) = authority[..at].split_once(':')
        {
            found.push(pw.to_string());
        }
        if let Some(q) = rest.find('?') {
            for kv in rest[q + 1..].split(['&', '#']) {
                if let Some((k, v)) = kv.split_once('=')
                    && is_secret_key(k)
                {
                    found.push(v.to_string());
                }
            }
        }
    }
    let decoded: Vec<String> = found.iter().map(|s| percent_decode(s)).collect();
    found.extend(decoded);
    found.retain(|s| !s.is_empty());
    found.sort();
    found.dedup();
    found
}

/// Removes every secret of `url` from `message`.
pub(crate) fn scrub(message: &str, url: &str) -> String {
    let mut out = message.to_string();
    // Longest first, so a secret that contains another is removed whole.
    let mut secrets = url_secrets(url);
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for s in secrets {
        out = out.replace(&s, "***");
    }
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_user_password() {
        assert_eq!(
            redact_url("postgres://kevo:s3cr%40t@db.example:5432/kevo"),
            "postgres://kevo:***@db.example:5432/kevo"
        );
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1:5432/test"),
            "postgres://postgres@127.0.0.1:5432/test"
        );
        assert_eq!(
            redact_url("postgresql://u:p@h/db?sslmode=require&password=x#frag"),
            "postgresql://u:***@h/db?sslmode=require&password=***#frag"
        );
        assert_eq!(redact_url("postgres://h"), "postgres://h");
    }

    #[test]
    fn scrubs_raw_and_decoded_secrets() {
        let url = "postgres://u:s3cr%40t@h/db?password=other";
        let msg = "failed for s3cr@t, s3cr%40t and other";
        let clean = scrub(msg, url);
        assert!(!clean.contains("s3cr"), "{clean}");
        assert!(!clean.contains("other"), "{clean}");
    }

    #[test]
    fn parses_targets() {
        assert_eq!(
            Target::parse("postgres://h/db").unwrap(),
            Target::Postgres("postgres://h/db".into())
        );
        assert_eq!(
            Target::parse("sqlite://a/b.db").unwrap(),
            Target::Sqlite("a/b.db".into())
        );
        assert_eq!(
            Target::parse("sqlite:b.db").unwrap(),
            Target::Sqlite("b.db".into())
        );
        assert_eq!(
            Target::parse(".kevo/kevo.db").unwrap(),
            Target::Sqlite(".kevo/kevo.db".into())
        );
        assert!(Target::parse("mysql://u:pw@h/db").is_err());
        assert!(Target::parse("sqlite::memory:").is_err());
        let err = Target::parse("mysql://u:pw@h/db").unwrap_err().to_string();
        assert!(!err.contains("pw"), "{err}");
    }
}

//! One redaction for everything a provider hands back: completion text,
//! reasoning, the model name a server reports, error messages, a command's
//! stderr. A server that echoes the key (in an error body, in `model`) or a
//! `cmd:` proposer that prints its environment must not get a key into the
//! store, the terminal or the next prompt.
//!
//! What is redacted: the endpoint's own key, the value of every variable in
//! kevo's environment whose name marks a credential (`*_API_KEY`,
//! `*TOKEN*`, ...; the rule workers use), and anything shaped like a
//! well-known key format (`sk-…`, `sk-ant-…`, `ghp_…`) even if kevo never
//! held it.

use crate::error::ProviderError;
use crate::types::Completion;

/// Shortest environment value treated as a secret: shorter ones ("1",
/// "yes") would redact ordinary words.
const MIN_ENV_SECRET: usize = 8;

/// Prefixes of well-known key formats, each followed by at least
/// [`MIN_KEY_TAIL`] key characters.
const KEY_PREFIXES: &[&str] = &["sk-", "ghp_", "gho_", "github_pat_", "xoxb-", "AIza"];
const MIN_KEY_TAIL: usize = 16;

pub const REDACTED: &str = "[redacted]";

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a key that contains another is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// Redacts `secrets` (keys kevo holds) and nothing from the environment.
    pub fn with_secrets(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| s.len() >= 4).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// `secrets` plus the credential-named variables of `vars`.
    pub fn with_environment(
        secrets: impl IntoIterator<Item = String>,
        vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    ) -> Self {
        let from_env = vars.into_iter().filter_map(|(k, v)| {
            let v = v.into_string().ok()?;
            (kevo_sandbox::env::is_secret(&k) && v.len() >= MIN_ENV_SECRET).then_some(v)
        });
        Self::with_secrets(secrets.into_iter().chain(from_env))
    }

    /// `secrets` plus the credential-named variables of this process.
    pub fn from_process(secrets: impl IntoIterator<Item = String>) -> Self {
        Self::with_environment(secrets, std::env::vars_os())
    }

    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        redact_key_shapes(&out)
    }

    pub fn completion(&self, mut c: Completion) -> Completion {
        c.text = self.text(&c.text);
        c.reasoning = c.reasoning.map(|r| self.text(&r));
        c.model = self.text(&c.model);
        c.provider = self.text(&c.provider);
        c.finish_reason = c.finish_reason.map(|f| self.text(&f));
        for call in &mut c.tool_calls {
            call.arguments = self.text(&call.arguments);
        }
        c.native = c
            .native
            .map(|v| crate::sanitize::map_strings(v, &|t| self.text(t)));
        c
    }

    pub fn error(&self, e: ProviderError) -> ProviderError {
        e.map_text(&|t| self.text(t))
    }
}

/// Replace every run that looks like a well-known key format.
fn redact_key_shapes(text: &str) -> String {
    let key_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for p in KEY_PREFIXES {
            // Only at the start of a token: "task-" inside a word is not "sk-".
            let at_boundary = out.chars().next_back().is_none_or(|c| !key_char(c));
            if at_boundary && rest.starts_with(p) {
                let tail = rest[p.len()..]
                    .char_indices()
                    .find(|(_, c)| !key_char(*c))
                    .map_or(rest.len() - p.len(), |(i, _)| i);
                if tail >= MIN_KEY_TAIL {
                    out.push_str(REDACTED);
                    rest = &rest[p.len() + tail..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_credential_variables_are_replaced() {
        let r = Redactor::with_environment(
            ["local-key-1234".to_string()],
            [
                ("MY_SERVICE_TOKEN".into(), "tok-abcdefgh".into()),
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("SHORT_KEY".into(), "abc".into()),
            ],
        );
        assert_eq!(
            r.text("bad key local-key-1234, token tok-abcdefgh, path /usr/bin:/bin"),
            "bad key [redacted], token [redacted], path /usr/bin:/bin"
        );
        // Short values are left alone: "abc" is an ordinary word.
        assert_eq!(r.text("abc"), "abc");
    }

    #[test]
    fn key_shapes_are_replaced_even_when_unknown() {
        let r = Redactor::default();
        assert_eq!(
            r.text("served by sk-proj-AbCdEfGh0123456789xyz."),
            "served by [redacted]."
        );
        assert_eq!(r.text("sk-ant-api03-aaaaaaaaaaaaaaaaaaaa"), "[redacted]");
        // Too short, or inside a word: not a key.
        assert_eq!(
            r.text("sk-short and task-0123456789abcdefghij"),
            "sk-short and task-0123456789abcdefghij"
        );
        assert_eq!(r.text("héllo"), "héllo");
    }

    #[test]
    fn a_completion_and_an_error_are_redacted_everywhere() {
        let r = Redactor::with_secrets(["sk-canary-0000".to_string()]);
        let c = r.completion(Completion {
            text: "t sk-canary-0000".into(),
            reasoning: Some("r sk-canary-0000".into()),
            usage: Default::default(),
            cost_usd: None,
            latency: Default::default(),
            model: "sk-canary-0000".into(),
            provider: "p".into(),
            finish_reason: None,
            attempts: 1,
            usage_unknown: None,
            member: None,
            tool_calls: Vec::new(),
            native: None,
        });
        assert!(!format!("{c:?}").contains("canary"), "{c:?}");
        let e = r.error(ProviderError::GaveUp {
            attempts: 2,
            last: Box::new(ProviderError::Command {
                command: "c".into(),
                status: "exited".into(),
                stderr_tail: "OPENAI_API_KEY=sk-canary-0000".into(),
            }),
        });
        assert!(!e.to_string().contains("canary"), "{e}");
    }
}

//! Model spec strings: how a user names a model on the command line.
//!
//! ```text
//! specs    := member ("," member)*
//! member   := body ["=" WEIGHT]
//! body     := "cmd:" COMMAND                 external command, text on stdin
//!           | "agent:" COMMAND               a coding agent in a directory of
//!                                            its own, with kevo-tool
//!           | "cmd+json:" COMMAND            external command, JSON on stdin
//!           | "replay:" PATH ["#" MODE]      recorded responses; MODE is
//!                                            "ordered" (default) or "keyed"
//!           | PROVIDER ["@" URL] ":" MODEL   an HTTP API
//!           | "external"                     no model of kevo's own: the run
//!                                            is driven by `kevo ask`/`tell`
//!           | "none"                         no model at all: a run of no
//!                                            proposals (`--iterations 0`)
//!           | "batch:" PROVIDER ["@" URL] ":" MODEL
//!                                            the API's batch endpoint (half
//!                                            price, answers within 24 h)
//! PROVIDER := [A-Za-z0-9][A-Za-z0-9_.-]*     openai, anthropic, deepseek, ...
//! URL      := ("http" | "https") "://" HOST [":" PORT] [PATH]
//! ```
//!
//! Examples: `openai:gpt-5`, `anthropic:claude-opus-4-1`,
//! `openai@http://localhost:8000/v1:qwen2.5-coder`, `ollama:qwen2.5-coder:7b`
//! (the model runs to the end and may hold `:`), `cmd:./my-agent.sh`,
//! `replay:run.jsonl`, `replay:run.jsonl#keyed`,
//! `openai:gpt-5=0.7,anthropic:claude-opus-4-1=0.3` (a weighted ensemble).
//!
//! Rules that settle the ambiguous cases:
//! - The URL ends at the first `:` after its host, port and path, so a URL
//!   path cannot contain `:`; the model after it can.
//! - A trailing `=NUMBER` is always the weight. A command that itself ends
//!   in `=NUMBER` (`cmd:./a --t=0.7`) therefore needs an explicit weight
//!   (`cmd:./a --t=0.7=1`). A trailing `=` followed by something else is an
//!   error for API models and part of the text for `cmd:`/`replay:`.
//! - Members are split at a `,` only where the text after it starts a new
//!   member (`cmd:`, `replay:`, `NAME:` or `NAME@`), so a command may hold
//!   commas (`cmd:./a --models x,y`).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a parse error points at: the whole spec, the bad part and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid model spec `{spec}`: `{part}`: {reason}")]
pub struct SpecError {
    pub spec: String,
    pub part: String,
    pub reason: String,
}

/// How recorded responses are matched to requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayMode {
    /// The n-th request gets the n-th record, whatever its prompt.
    #[default]
    Ordered,
    /// A request gets the next unused record whose prompt hash matches.
    Keyed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SpecKind {
    Api {
        provider: String,
        base_url: Option<String>,
        model: String,
    },
    Cmd {
        command: String,
        json: bool,
    },
    /// A command-line coding agent, run with its tools (`agent:`).
    Agent {
        command: String,
    },
    Replay {
        path: PathBuf,
        mode: ReplayMode,
    },
    /// Answers come from outside (`kevo tell`); kevo calls no model.
    External,
    /// No model: a run that makes no proposals (the seed evaluated,
    /// stored and scored at the held-out size).
    None,
    /// An HTTP API's batch endpoint (OpenAI's Batch API, Anthropic's
    /// Message Batches).
    Batch {
        provider: String,
        base_url: Option<String>,
        model: String,
    },
}

/// One parsed member of a spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub kind: SpecKind,
    pub weight: Option<f64>,
    /// The member's text as written, weight included.
    pub text: String,
}

impl ModelSpec {
    /// The spec without its weight, e.g. `openai:gpt-5`; used as the
    /// accounting key.
    pub fn label(&self) -> String {
        match &self.kind {
            SpecKind::Api {
                provider,
                base_url: None,
                model,
            } => format!("{provider}:{model}"),
            SpecKind::Api {
                provider,
                base_url: Some(u),
                model,
            } => format!("{provider}@{u}:{model}"),
            SpecKind::Cmd {
                command,
                json: false,
            } => format!("cmd:{command}"),
            SpecKind::Cmd {
                command,
                json: true,
            } => format!("cmd+json:{command}"),
            SpecKind::Agent { command } => format!("agent:{command}"),
            SpecKind::External => "external".to_string(),
            SpecKind::None => "none".to_string(),
            SpecKind::Batch {
                provider,
                base_url: None,
                model,
            } => format!("batch:{provider}:{model}"),
            SpecKind::Batch {
                provider,
                base_url: Some(u),
                model,
            } => format!("batch:{provider}@{u}:{model}"),
            SpecKind::Replay { path, mode } => match mode {
                ReplayMode::Ordered => format!("replay:{}", path.display()),
                ReplayMode::Keyed => format!("replay:{}#keyed", path.display()),
            },
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for ModelSpec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        parse_member(s, s)
    }
}

/// Parse a comma-separated list of members (one member is a list of one).
pub fn parse_specs(text: &str) -> Result<Vec<ModelSpec>, SpecError> {
    let err = |part: &str, reason: &str| SpecError {
        spec: text.to_string(),
        part: part.to_string(),
        reason: reason.to_string(),
    };
    if text.trim().is_empty() {
        return Err(err(text, "empty model spec"));
    }
    let mut members = Vec::new();
    let mut start = 0;
    for (i, _) in text.match_indices(',') {
        let rest = text[i + 1..].trim_start();
        if rest.is_empty() || rest.starts_with(',') || starts_member(rest) {
            members.push(&text[start..i]);
            start = i + 1;
        }
    }
    members.push(&text[start..]);
    members
        .into_iter()
        .map(|m| {
            if m.trim().is_empty() {
                Err(err(m, "empty member (two commas in a row?)"))
            } else {
                parse_member(text, m)
            }
        })
        .collect()
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+')
}

/// Does `s` begin a new member: `cmd:`, `replay:`, `NAME:` or `NAME@`?
fn starts_member(s: &str) -> bool {
    let s = s.trim_start();
    let name_len = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
    name_len > 0 && s[name_len..].starts_with([':', '@'])
}

/// One member of the spec `whole`: its kind, told by its prefix, and its
/// weight.
fn parse_member(whole: &str, member: &str) -> Result<ModelSpec, SpecError> {
    let text = member.trim();
    let err = |e: PartError<'_>| spec_error(whole, e);
    let (body, weight) = split_weight(text).map_err(err)?;
    let kind = if let Some(api) = body.strip_prefix("batch:") {
        batch_kind(whole, body, api)?
    } else if body == "external" {
        SpecKind::External
    } else if body == "none" {
        SpecKind::None
    } else if let Some(command) = body.strip_prefix("agent:") {
        match cmd_kind(body, command).map_err(err)? {
            SpecKind::Cmd { command, .. } => SpecKind::Agent { command },
            other => other,
        }
    } else if let Some(command) = body.strip_prefix("cmd+json:").or(body.strip_prefix("cmd:")) {
        cmd_kind(body, command).map_err(err)?
    } else if let Some(rest) = body.strip_prefix("replay:") {
        replay_kind(body, rest).map_err(err)?
    } else {
        api_kind(body).map_err(err)?
    };
    Ok(ModelSpec {
        kind,
        weight,
        text: text.to_string(),
    })
}

/// The error of spec `whole` at a part of it.
fn spec_error(whole: &str, (part, reason): PartError<'_>) -> SpecError {
    SpecError {
        spec: whole.to_string(),
        part: part.to_string(),
        reason,
    }
}

/// `batch:` + an API member (`api`): the same provider, URL and model,
/// through the batch endpoint.
fn batch_kind(whole: &str, body: &str, api: &str) -> Result<SpecKind, SpecError> {
    match parse_member(whole, api)?.kind {
        SpecKind::Api {
            provider,
            base_url,
            model,
        } => Ok(SpecKind::Batch {
            provider,
            base_url,
            model,
        }),
        _ => Err(spec_error(
            whole,
            (
                body,
                "`batch:` takes an HTTP API, e.g. `batch:openai:gpt-5`".into(),
            ),
        )),
    }
}

/// `cmd:COMMAND` or `cmd+json:COMMAND` (`body`, with `command` after the
/// prefix).
fn cmd_kind<'a>(body: &'a str, command: &str) -> Result<SpecKind, PartError<'a>> {
    let prefix = &body[..body.len() - command.len()];
    let command = command.trim();
    if command.is_empty() {
        return Err((body, format!("no command after `{prefix}`")));
    }
    Ok(SpecKind::Cmd {
        command: command.to_string(),
        json: body.starts_with("cmd+json:"),
    })
}

/// `replay:PATH[#MODE]` (`body`, with `rest` after the prefix).
fn replay_kind<'a>(body: &'a str, rest: &'a str) -> Result<SpecKind, PartError<'a>> {
    let (path, mode) = match rest.rsplit_once('#') {
        None => (rest, ReplayMode::Ordered),
        Some((p, "ordered")) => (p, ReplayMode::Ordered),
        Some((p, "keyed")) => (p, ReplayMode::Keyed),
        Some((_, other)) => {
            return Err((
                other,
                "unknown replay mode (expected `#ordered` or `#keyed`)".into(),
            ));
        }
    };
    if path.trim().is_empty() {
        return Err((body, "no file after `replay:`".into()));
    }
    Ok(SpecKind::Replay {
        path: PathBuf::from(path.trim()),
        mode,
    })
}

/// `PROVIDER[@URL]:MODEL`, an HTTP API; a `=` left in it is a bad weight.
fn api_kind(body: &str) -> Result<SpecKind, PartError<'_>> {
    if body.contains('=') {
        let tail = body.rsplit_once('=').map_or("", |(_, t)| t);
        return Err((
            tail,
            "is not a weight (expected `SPEC=NUMBER`, e.g. `openai:gpt-5=0.7`)".into(),
        ));
    }
    let name_len = body.find(|c: char| !is_name_char(c)).unwrap_or(body.len());
    let provider = &body[..name_len];
    if provider.is_empty() {
        return Err((
            body,
            "expected PROVIDER:MODEL, PROVIDER@URL:MODEL, cmd:COMMAND or replay:FILE".into(),
        ));
    }
    let rest = &body[name_len..];
    let (base_url, model) = if let Some(url_and_model) = rest.strip_prefix('@') {
        let (url, model) = split_url(url_and_model)?;
        (Some(url), model)
    } else if let Some(model) = rest.strip_prefix(':') {
        (None, model)
    } else {
        return Err((
            body,
            "expected `:MODEL` after the provider name (e.g. `openai:gpt-5`)".into(),
        ));
    };
    if model.trim().is_empty() {
        return Err((body, "no model name after `:`".into()));
    }
    Ok(SpecKind::Api {
        provider: provider.to_ascii_lowercase(),
        base_url,
        model: model.trim().to_string(),
    })
}

type PartError<'a> = (&'a str, String);

/// Split a trailing `=NUMBER` off.
fn split_weight(text: &str) -> Result<(&str, Option<f64>), PartError<'_>> {
    let Some((body, tail)) = text.rsplit_once('=') else {
        return Ok((text, None));
    };
    match tail.trim().parse::<f64>() {
        Ok(w) if w.is_finite() && w > 0.0 => Ok((body.trim_end(), Some(w))),
        Ok(_) => Err((tail, "a weight must be a positive finite number".into())),
        Err(_) => Ok((text, None)),
    }
}

/// `http://host:port/path:model` -> (`http://host:port/path`, `model`).
fn split_url(s: &str) -> Result<(String, &str), PartError<'_>> {
    let scheme_end = s
        .find("://")
        .filter(|&i| matches!(&s[..i], "http" | "https"))
        .ok_or((
            s,
            "the base URL must start with http:// or https://".to_string(),
        ))?;
    let mut i = scheme_end + 3;
    let b = s.as_bytes();
    // Host: a bracketed IPv6 literal or a run of non-separators.
    if b.get(i) == Some(&b'[') {
        let close = s[i..]
            .find(']')
            .ok_or((s, "unclosed `[` in the IPv6 host".to_string()))?;
        i += close + 1;
    } else {
        while i < b.len() && b[i] != b':' && b[i] != b'/' {
            i += 1;
        }
    }
    if i == scheme_end + 3 {
        return Err((s, "the base URL has no host".into()));
    }
    // Optional port: `:` followed by digits and then `/`, `:` or the end.
    if b.get(i) == Some(&b':') {
        let digits = s[i + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(s.len() - i - 1);
        let after = i + 1 + digits;
        if digits > 0 && (after == b.len() || b[after] == b'/' || b[after] == b':') {
            i = after;
        }
    }
    // Optional path up to the next `:`.
    if b.get(i) == Some(&b'/') {
        i += s[i..].find(':').unwrap_or(s.len() - i);
    }
    let url = s[..i].trim_end_matches('/').to_string();
    match s[i..].strip_prefix(':') {
        Some(model) => Ok((url, model)),
        None => Err((
            s,
            "expected `:MODEL` after the base URL (e.g. `openai@http://localhost:8000/v1:my-model`)"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> ModelSpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn api(provider: &str, base_url: Option<&str>, model: &str) -> SpecKind {
        SpecKind::Api {
            provider: provider.into(),
            base_url: base_url.map(Into::into),
            model: model.into(),
        }
    }

    #[test]
    fn parses_every_documented_form() {
        assert_eq!(one("openai:gpt-5").kind, api("openai", None, "gpt-5"));
        assert_eq!(
            one("anthropic:claude-opus-4-1").kind,
            api("anthropic", None, "claude-opus-4-1")
        );
        assert_eq!(
            one("openai@http://localhost:8000/v1:qwen2.5-coder").kind,
            api("openai", Some("http://localhost:8000/v1"), "qwen2.5-coder")
        );
        assert_eq!(
            one("ollama:qwen2.5-coder:7b").kind,
            api("ollama", None, "qwen2.5-coder:7b")
        );
        assert_eq!(
            one("vllm@http://127.0.0.1:8000:Qwen/Qwen2.5-Coder-32B:latest").kind,
            api(
                "vllm",
                Some("http://127.0.0.1:8000"),
                "Qwen/Qwen2.5-Coder-32B:latest"
            )
        );
        assert_eq!(
            one("x@https://[::1]:9000/api/v1/:m").kind,
            api("x", Some("https://[::1]:9000/api/v1"), "m")
        );
        assert_eq!(
            one("x@http://host:m").kind,
            api("x", Some("http://host"), "m")
        );
        assert_eq!(
            one("cmd:./my-agent.sh --fast").kind,
            SpecKind::Cmd {
                command: "./my-agent.sh --fast".into(),
                json: false
            }
        );
        assert_eq!(
            one("cmd+json:python3 a.py").kind,
            SpecKind::Cmd {
                command: "python3 a.py".into(),
                json: true
            }
        );
        assert_eq!(
            one("replay:run.jsonl").kind,
            SpecKind::Replay {
                path: "run.jsonl".into(),
                mode: ReplayMode::Ordered
            }
        );
        assert_eq!(
            one("replay:dir/run.jsonl#keyed").kind,
            SpecKind::Replay {
                path: "dir/run.jsonl".into(),
                mode: ReplayMode::Keyed
            }
        );
        assert_eq!(one("OpenAI:gpt-5").label(), "openai:gpt-5");
        assert_eq!(one("external").kind, SpecKind::External);
        assert_eq!(one("none").kind, SpecKind::None);
        assert_eq!(one("none").label(), "none");
        assert_eq!(
            one("batch:openai@http://127.0.0.1:9/v1:gpt-5").kind,
            SpecKind::Batch {
                provider: "openai".into(),
                base_url: Some("http://127.0.0.1:9/v1".into()),
                model: "gpt-5".into()
            }
        );
        assert_eq!(
            one("batch:anthropic:claude-opus-4-1").label(),
            "batch:anthropic:claude-opus-4-1"
        );
        let err = "batch:cmd:./a.sh".parse::<ModelSpec>().unwrap_err();
        assert!(err.reason.contains("HTTP API"), "{err}");
        assert_eq!(one(" external ").label(), "external");
        // A provider named like it still needs its model.
        assert!(matches!(one("external:m").kind, SpecKind::Api { .. }));
    }

    #[test]
    fn weights_and_lists() {
        let v = parse_specs("openai:gpt-5=0.7, anthropic:claude-opus-4-1=0.3").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].weight, Some(0.7));
        assert_eq!(v[1].weight, Some(0.3));
        assert_eq!(v[1].label(), "anthropic:claude-opus-4-1");
        // Commas inside a command stay in the command.
        let v = parse_specs("cmd:./a --models x,y=2,openai:gpt-5").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0].kind,
            SpecKind::Cmd {
                command: "./a --models x,y".into(),
                json: false
            }
        );
        assert_eq!(v[0].weight, Some(2.0));
        // `=NUMBER` at the end is the weight; `=word` stays in a command.
        let s = one("cmd:./a --t=0.7=1");
        assert_eq!(s.weight, Some(1.0));
        assert_eq!(
            s.kind,
            SpecKind::Cmd {
                command: "./a --t=0.7".into(),
                json: false
            }
        );
        assert_eq!(one("cmd:./a --mode=fast").weight, None);
    }

    #[test]
    fn errors_name_the_bad_part() {
        for (spec, part, reason) in [
            ("gpt-5", "gpt-5", "expected `:MODEL`"),
            ("openai:", "openai:", "no model name"),
            ("openai:gpt-5=heavy", "heavy", "is not a weight"),
            ("openai:gpt-5=-1", "-1", "positive"),
            ("openai@localhost:8000:m", "localhost:8000:m", "http://"),
            (
                "openai@http://localhost:8000",
                "http://localhost:8000",
                ":MODEL",
            ),
            ("replay:run.jsonl#random", "random", "replay mode"),
            ("cmd:", "cmd:", "no command"),
            ("openai:a,,anthropic:b", "", "empty member"),
            (":m", ":m", "expected PROVIDER"),
        ] {
            let e = parse_specs(spec).unwrap_err();
            assert_eq!(e.part.trim(), part, "{spec}: {e}");
            assert!(e.to_string().contains(reason), "{spec}: {e}");
            assert!(e.to_string().contains(spec), "{spec}: {e}");
        }
    }
}

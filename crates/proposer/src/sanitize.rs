//! Text a model endpoint wrote, made safe to store and to print. A served
//! model name, an error body, a finish reason or a `cmd:` proposer's
//! stderr is whatever the other side chose to send: an escape sequence in
//! it would retitle the window, clear the screen or fake lines when
//! `kevo show` prints it, and a bidi override would make it read other
//! than it is.
//!
//! Two layers:
//!
//! - [`completion`] and [`error`] (and [`line`], [`text`] for single
//!   strings) replace every control character with U+FFFD before a reply
//!   leaves the provider layer: every provider's answer passes through
//!   them (the per-model wrapper around OpenAI-compatible, Anthropic,
//!   `cmd:` and replay providers, and the batch endpoints), so nothing
//!   that reaches the store or a notice holds one. The answer's text, the
//!   kernel that is extracted as code, is left as it came.
//! - [`terminal`] escapes the same characters visibly (`\u001b`), for the
//!   commands that print what a store holds (stores written before this
//!   layer existed, or text that is not a provider's). Its escapes are
//!   JSON escapes, so JSON output stays valid JSON with the same value.
//!
//! What counts as a control character: C0 (U+0000-U+001F, where multi-line
//! text keeps `\n` and `\t`), DEL (U+007F), C1 (U+0080-U+009F, where
//! U+009B is the one-byte CSI) and the bidi embeddings, overrides and
//! isolates (U+202A-U+202E, U+2066-U+2069).

use std::borrow::Cow;

use crate::error::ProviderError;
use crate::types::Completion;

/// What a removed character becomes in stored text: visible, and never
/// part of an escape sequence.
pub const REPLACEMENT: char = '\u{fffd}';

/// A control character as this module counts them (newline and tab
/// included; [`text`] and [`terminal`] keep those two).
pub fn is_control(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// `s` with every control character replaced (U+FFFD), newlines and tabs
/// included: for one-line fields such as a model name or a finish reason.
pub fn line(s: &str) -> String {
    if !s.chars().any(is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| if is_control(c) { REPLACEMENT } else { c })
        .collect()
}

/// `s` with every control character but `\n` and `\t` replaced (U+FFFD);
/// a CR that ends a line (CR LF) is dropped. For multi-line text: an error
/// body, a command's stderr, reasoning.
pub fn text(s: &str) -> String {
    let keeps = |c: char| c == '\n' || c == '\t' || !is_control(c);
    if s.chars().all(keeps) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        out.push(if keeps(c) { c } else { REPLACEMENT });
    }
    out
}

/// `s` for a terminal: every control character but `\n` and `\t` written
/// as a visible escape (`\u001b`, `\u202e`), the rest unchanged. The
/// escapes are JSON's, so JSON text stays valid and means the same.
pub fn terminal(s: &str) -> Cow<'_, str> {
    let escaped = |c: char| c != '\n' && c != '\t' && is_control(c);
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A completion with every provider-supplied field but its text cleaned:
/// model, provider, finish reason, the usage note and the member are one
/// line; reasoning keeps its newlines.
pub fn completion(mut c: Completion) -> Completion {
    c.reasoning = c.reasoning.map(|r| text(&r));
    c.model = line(&c.model);
    c.provider = line(&c.provider);
    c.finish_reason = c.finish_reason.map(|f| line(&f));
    c.usage_unknown = c.usage_unknown.map(|u| line(&u));
    c.member = c.member.map(|m| line(&m));
    for call in &mut c.tool_calls {
        call.id = line(&call.id);
        call.name = line(&call.name);
        call.arguments = text(&call.arguments);
    }
    c.native = c.native.map(|v| map_strings(v, &text));
    c
}

/// `v` with `f` applied to every string in it, keys included.
pub fn map_strings(v: serde_json::Value, f: &dyn Fn(&str) -> String) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(f(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(|i| map_strings(i, f)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (f(&k), map_strings(v, f)))
                .collect(),
        ),
        other => other,
    }
}

/// An error with every text it carries cleaned (newlines kept: a body or
/// a stderr tail has several lines).
pub fn error(e: ProviderError) -> ProviderError {
    e.map_text(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVIL: &str = "x<!--<script>alert(1)</script>\u{1b}]0;pwned\u{7}\u{1b}[2J";

    #[test]
    fn every_control_character_is_replaced_in_a_line() {
        assert_eq!(
            line(EVIL),
            "x<!--<script>alert(1)</script>\u{fffd}]0;pwned\u{fffd}\u{fffd}[2J"
        );
        assert_eq!(line("a\nb\tc\r"), "a\u{fffd}b\u{fffd}c\u{fffd}");
        for c in [
            '\u{0}', '\u{8}', '\u{1b}', '\u{7f}', '\u{80}', '\u{9b}', '\u{9f}', '\u{202a}',
            '\u{202e}', '\u{2066}', '\u{2069}',
        ] {
            assert!(is_control(c), "{c:?}");
            assert_eq!(line(&format!("a{c}b")), "a\u{fffd}b", "{c:?}");
        }
        // Printable text of any script is left alone, U+00A0 and U+2028
        // (not controls) included.
        for ok in [
            "gpt-5-2025-08-07",
            "héllo wörld",
            "模型",
            "a\u{a0}b",
            "\u{2028}",
            "a\u{202f}b",
        ] {
            assert_eq!(line(ok), ok);
        }
    }

    #[test]
    fn multi_line_text_keeps_newlines_and_tabs() {
        assert_eq!(text("a\r\nb\tc\n"), "a\nb\tc\n");
        assert_eq!(text("50%\rdone"), "50%\u{fffd}done");
        assert_eq!(
            text("\u{1b}[31mred\u{1b}[0m\n\u{9b}2J\u{202e}"),
            "\u{fffd}[31mred\u{fffd}[0m\n\u{fffd}2J\u{fffd}"
        );
        assert_eq!(text("plain\n"), "plain\n");
    }

    #[test]
    fn the_terminal_form_escapes_visibly_and_keeps_json_valid() {
        assert_eq!(
            terminal(EVIL),
            "x<!--<script>alert(1)</script>\\u001b]0;pwned\\u0007\\u001b[2J"
        );
        assert_eq!(terminal("a\nb\tc\rd"), "a\nb\tc\\u000dd");
        assert_eq!(terminal("\u{9b}\u{7f}\u{2067}"), "\\u009b\\u007f\\u2067");
        assert!(matches!(terminal("plain\n"), Cow::Borrowed(_)));
        // serde_json escapes C0 itself; what it leaves raw (C1, DEL,
        // bidi) is escaped here, and the JSON still parses to the same
        // value.
        let value = serde_json::json!({ "model": format!("{EVIL}\u{9b}\u{7f}\u{202e}") });
        let printed = terminal(&serde_json::to_string_pretty(&value).unwrap()).into_owned();
        assert!(
            !printed.chars().any(|c| c != '\n' && is_control(c)),
            "{printed}"
        );
        let back: serde_json::Value = serde_json::from_str(&printed).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn a_completion_is_cleaned_but_its_text_is_not() {
        let c = completion(Completion {
            text: "```c\nchar esc = '\u{1b}';\n```".into(),
            reasoning: Some("think\n\u{1b}[2J".into()),
            usage: Default::default(),
            cost_usd: None,
            latency: Default::default(),
            model: EVIL.into(),
            provider: "p\u{7}".into(),
            finish_reason: Some("stop\u{1b}[8m".into()),
            attempts: 1,
            usage_unknown: Some("no\nusage\u{9b}".into()),
            member: Some("m\u{202e}".into()),
            tool_calls: vec![crate::types::ToolCall {
                id: "id\u{1b}".into(),
                name: EVIL.into(),
                arguments: "{\"source\": \"a\nb\u{7}\"}".into(),
            }],
            native: Some(serde_json::json!({"content": "x\u{1b}[2J"})),
        });
        assert_eq!(c.text, "```c\nchar esc = '\u{1b}';\n```");
        assert_eq!(c.reasoning.as_deref(), Some("think\n\u{fffd}[2J"));
        assert_eq!(c.model, line(EVIL));
        assert_eq!(c.provider, "p\u{fffd}");
        assert_eq!(c.finish_reason.as_deref(), Some("stop\u{fffd}[8m"));
        assert_eq!(c.usage_unknown.as_deref(), Some("no\u{fffd}usage\u{fffd}"));
        assert_eq!(c.member.as_deref(), Some("m\u{fffd}"));
        let call = &c.tool_calls[0];
        assert_eq!(
            (call.id.as_str(), call.name.clone()),
            ("id\u{fffd}", line(EVIL))
        );
        assert_eq!(call.arguments, "{\"source\": \"a\nb\u{fffd}\"}");
        assert_eq!(c.native.unwrap()["content"], "x\u{fffd}[2J");
    }

    #[test]
    fn an_error_is_cleaned_everywhere() {
        let e = error(ProviderError::GaveUp {
            attempts: 2,
            last: Box::new(ProviderError::Http {
                provider: "p".into(),
                status: 500,
                body: format!("line 1\r\n{EVIL}"),
                retry_after: None,
            }),
        });
        let shown = e.to_string();
        assert!(
            !shown.chars().any(|c| c != '\n' && is_control(c)),
            "{shown:?}"
        );
        assert!(shown.contains("line 1\nx<!--"), "{shown:?}");
    }
}

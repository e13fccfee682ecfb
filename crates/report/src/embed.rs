//! JSON inside HTML: the report's data block and the dashboard's script.
//!
//! Inside a `<script>` element the HTML tokenizer, not JSON, decides where
//! the element ends: `</script` closes it, and `<!--` followed by
//! `<script` switches it into a state where the real end tag no longer
//! closes it (the next script on the page is swallowed as text). A stored
//! string, a model name a server chose for instance, may hold any of
//! these. So every `<`, `>` and `&` is written as a JSON escape, as are
//! U+2028 and U+2029 (line terminators to older JavaScript): none of those
//! characters can appear outside a JSON string, and inside one the escape
//! means the same character, so the value parses back unchanged.

use serde::Serialize;

/// `value` as JSON text that is inert inside an HTML `<script>` element
/// (a data block or script code): no `<`, `>`, `&`, U+2028 or U+2029 (and
/// no DEL, C1 or bidi control either).
pub fn json_for_html<T: Serialize + ?Sized>(value: &T) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    escape_json_for_html(&text)
}

/// The same for JSON text already written.
pub fn escape_json_for_html(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            // Line terminators to older JavaScript; DEL, C1 and the bidi
            // controls (serde_json escapes only C0) for a page that holds
            // no control character at all.
            '\u{2028}'
            | '\u{2029}'
            | '\u{7f}'..='\u{9f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn nothing_markup_can_read_survives_and_the_value_is_the_same() {
        for evil in [
            "x<!--<script>alert(1)</script>\u{1b}]0;pwned\u{7}\u{1b}[2J",
            "</script><script>alert(1)</script>",
            "<!--",
            "-->",
            "</SCRIPT >",
            "<\\/script>",
            "a & b &amp; <b>",
            "line\u{2028}separator\u{2029}paragraph",
            "c1\u{9b}2J del\u{7f} bidi\u{202e}\u{2066}",
            "]]>",
        ] {
            let value = json!({ "model": evil, "list": [evil], evil: 1 });
            let text = json_for_html(&value);
            for bad in [
                '<', '>', '&', '\u{2028}', '\u{2029}', '\u{9b}', '\u{7f}', '\u{202e}',
            ] {
                assert!(!text.contains(bad), "{bad:?} in {text}");
            }
            let back: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value, "{text}");
        }
        assert_eq!(json_for_html("<a>&"), r#""\u003ca\u003e\u0026""#);
        assert_eq!(json_for_html(&json!({"n": 1.5})), r#"{"n":1.5}"#);
    }
}

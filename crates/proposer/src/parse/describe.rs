//! What a response says it changed: the first sentence of its prose, for
//! the history lines of later prompts ("iter 4: ... tried: float4 loads").
//!
//! The prose is everything outside fenced blocks and SEARCH/REPLACE edits.
//! It comes from the provider's already redacted text, and the prompt
//! builder scans it for held-out size labels like every other history
//! line.

use super::diff::{is_replace, is_search};

/// Characters kept of the first sentence; longer ones end in "...".
pub const MAX_DESCRIPTION_CHARS: usize = 160;

/// The first sentence of `response`'s prose, markdown markers stripped and
/// whitespace collapsed; None when the response has no prose.
pub fn description(response: &str) -> Option<String> {
    let mut prose = Vec::new();
    let (mut in_fence, mut in_edit) = (false, false);
    for line in response.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if is_search(t) {
            in_edit = true;
            continue;
        }
        if in_edit {
            in_edit = !is_replace(t);
            continue;
        }
        // Headings ("## Plan") name a section, not the change.
        if t.starts_with('#') {
            continue;
        }
        let t = t.trim_start_matches(['>', '*', '-', ' ']).trim();
        if !t.is_empty() {
            prose.push(t.replace("**", ""));
        } else if !prose.is_empty() {
            // A paragraph ends the first sentence at the latest.
            break;
        }
    }
    let text = prose.join(" ");
    // Prose a model wrote, quoted in later prompts and history: no control
    // character survives (the code blocks are not part of it).
    let text = crate::sanitize::line(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    let sentence = first_sentence(&text);
    if sentence.is_empty() {
        return None;
    }
    Some(if sentence.chars().count() > MAX_DESCRIPTION_CHARS {
        let cut: String = sentence.chars().take(MAX_DESCRIPTION_CHARS - 3).collect();
        format!("{}...", cut.trim_end())
    } else {
        sentence.to_string()
    })
}

/// Up to and including the first '.', '!' or '?' that ends a word (so
/// "0.5f" and "e.g." inside a word do not end it).
fn first_sentence(text: &str) -> &str {
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| *n == b' ') {
            return &text[..=i];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sentence_of_the_prose_outside_code() {
        let r = "## Plan\n\nUse `float4` loads\n(0.5f stays). Then unroll.\n\n```opencl\n__kernel void f() {}\n```\nMore.";
        assert_eq!(
            description(r).as_deref(),
            Some("Use `float4` loads (0.5f stays).")
        );
        // A paragraph break ends it without a full stop.
        let r = "- Tile into local memory\n\nSecond paragraph.";
        assert_eq!(description(r).as_deref(), Some("Tile into local memory"));
        // Terminal escapes in the prose are replaced.
        let r = "Tile\u{1b}]0;pwned\u{7} it.\n```c\nchar e = '\u{1b}';\n```";
        assert_eq!(
            description(r).as_deref(),
            Some("Tile\u{fffd}]0;pwned\u{fffd} it.")
        );
    }

    #[test]
    fn edits_and_code_only_responses_have_no_prose() {
        let r = "<<<<<<< SEARCH\na. b\n=======\nc. d\n>>>>>>> REPLACE\n";
        assert_eq!(description(r), None);
        assert_eq!(description("```opencl\nx. y\n```"), None);
        let r = "**Tiled** version\n<<<<<<< SEARCH\na\n=======\nc\n>>>>>>> REPLACE\n";
        assert_eq!(description(r).as_deref(), Some("Tiled version"));
    }

    #[test]
    fn long_sentences_are_cut() {
        let r = "word ".repeat(100);
        let d = description(&r).unwrap();
        assert_eq!(d.chars().count(), MAX_DESCRIPTION_CHARS);
        assert!(d.ends_with("..."));
    }
}

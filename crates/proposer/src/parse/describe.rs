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

/// What `response` says it changed: the text of its `Summary:` line (the
/// output format asks for one), else the first sentence of its prose;
/// markdown markers stripped and whitespace collapsed; None when the
/// response has no prose. A label alone on its line ("**Optimisation**",
/// "Change:") is skipped like a heading: as the description it told later
/// prompts nothing ("tried: Optimisation"). It is the description only of
/// a response with no other prose ("**Use float4 loads**" over the code).
pub fn description(response: &str) -> Option<String> {
    let (lines, first_label) = prose_lines(response);
    let summary = lines.iter().find_map(|l| summary_text(l));
    let text = match summary {
        Some(text) => text.to_string(),
        None => Some(first_paragraph(&lines))
            .filter(|p| !p.is_empty())
            .or(first_label)
            .unwrap_or_default(),
    };
    // Prose a model wrote, quoted in later prompts and history: no control
    // character survives (the code blocks are not part of it).
    let text = crate::sanitize::line(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    let sentence = match summary {
        Some(_) => text.as_str(),
        None => first_sentence(&text),
    };
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

/// The response's prose lines outside fenced blocks and SEARCH/REPLACE
/// edits, headings and labels left out, list and quote markers and bold
/// stripped; an empty string where a paragraph ends. With them, the first
/// label's text.
fn prose_lines(response: &str) -> (Vec<String>, Option<String>) {
    let mut prose = Vec::new();
    let mut first_label: Option<String> = None;
    let (mut in_fence, mut in_edit) = (false, false);
    // A `Summary:` label alone on its line: its text is the next line.
    let mut summary_next = false;
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
        let plain = t
            .trim_start_matches(['>', '*', '-', ' '])
            .trim()
            .replace("**", "");
        if is_summary_label(&plain) && summary_text(&plain).is_none() {
            summary_next = true;
            continue;
        }
        if t.starts_with('#') {
            continue;
        }
        if is_label(t) {
            first_label.get_or_insert_with(|| plain.trim_end_matches(':').to_string());
            continue;
        }
        if summary_next && !plain.is_empty() {
            summary_next = false;
            prose.push(format!("Summary: {plain}"));
            continue;
        }
        prose.push(plain);
    }
    (prose, first_label)
}

/// A line that only names what follows: wholly bold, or ending in ':',
/// and at most four words ("**Optimisation**", "What changed:").
fn is_label(line: &str) -> bool {
    let plain = line
        .trim_start_matches(['>', '*', '-', ' '])
        .replace("**", "");
    let plain = plain.trim();
    let bold = line.starts_with("**") && line.ends_with("**") && line.len() > 4;
    let words = plain.split_whitespace().count();
    (bold || plain.ends_with(':')) && (1..=4).contains(&words) && !is_summary_label(plain)
}

fn is_summary_label(text: &str) -> bool {
    text.get(..8)
        .is_some_and(|head| head.eq_ignore_ascii_case("summary:"))
}

/// The text after `Summary:` on a line, if it is one and says something.
fn summary_text(line: &str) -> Option<&str> {
    is_summary_label(line)
        .then(|| line[8..].trim())
        .filter(|t| !t.is_empty())
}

/// The prose up to the first paragraph break after some text.
fn first_paragraph(lines: &[String]) -> String {
    let mut paragraph: Vec<&str> = Vec::new();
    for l in lines {
        if !l.is_empty() {
            paragraph.push(l);
        } else if !paragraph.is_empty() {
            break;
        }
    }
    paragraph.join(" ")
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
    fn a_summary_line_is_the_description_and_labels_are_skipped() {
        let r = "**Summary:** float4 loads and two outputs per work-item\n\nI changed many things. More.\n```opencl\nk\n```";
        assert_eq!(
            description(r).as_deref(),
            Some("float4 loads and two outputs per work-item")
        );
        let r = "**Optimisation**\n\nTiling through local memory. Then more.";
        assert_eq!(
            description(r).as_deref(),
            Some("Tiling through local memory.")
        );
        let r = "Change:\nUnroll the inner loop by 4.";
        assert_eq!(
            description(r).as_deref(),
            Some("Unroll the inner loop by 4.")
        );
        // A label is the description only when nothing else is.
        let r = "**Use float4 loads**\n```opencl\nk\n```";
        assert_eq!(description(r).as_deref(), Some("Use float4 loads"));
        // A summary label alone: its text is on the next line.
        let r = "Summary:\n\nFuse the two passes\nMore prose.";
        assert_eq!(description(r).as_deref(), Some("Fuse the two passes"));
    }

    #[test]
    fn long_sentences_are_cut() {
        let r = "word ".repeat(100);
        let d = description(&r).unwrap();
        assert_eq!(d.chars().count(), MAX_DESCRIPTION_CHARS);
        assert!(d.ends_with("..."));
    }
}

//! Fenced code blocks and the choice among them.
//!
//! A block opens with three or more backticks, an optional info string
//! whose first word is the language tag, and a newline; it closes at the
//! next run of at least as many backticks, wherever it stands (models
//! sometimes end a block with `}```` on the code's last line). A block with
//! no closing fence runs to the end of the text and is marked unclosed.
//! Kernel code never holds three backticks, so this is unambiguous in
//! practice.
//!
//! Choosing the candidate (Metal-Sci section 14.5, extended to three
//! dialects), among closed, non-empty blocks:
//! 1. blocks tagged for the dialect ([`tags`]): prefer those containing every
//!    entry-point name, then dialect-specific tags over generic C ones,
//!    then the longest;
//! 2. else blocks of any tag containing every entry-point name: the longest;
//! 3. else the longest block.

use kevo_backend::Dialect;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// Lowercased first word of the info string.
    pub tag: Option<String>,
    pub body: String,
    pub closed: bool,
}

/// Which rule picked the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FenceRule {
    DialectTag,
    EntryPoints,
    Longest,
}

/// Accepted tags per dialect: (specific, generic). Generic C-family tags
/// are accepted because models often label CUDA `cpp` and OpenCL `c`.
pub fn tags(dialect: Dialect) -> (&'static [&'static str], &'static [&'static str]) {
    match dialect {
        Dialect::Cuda => (&["cuda", "cu", "cuh"], &["c++", "cpp", "cxx", "cc", "c"]),
        Dialect::OpenCl => (
            &["opencl", "cl", "ocl", "opencl-c", "openclc"],
            &["c", "c++", "cpp"],
        ),
        Dialect::Metal => (&["metal", "msl"], &["c++", "cpp", "c"]),
        Dialect::Triton => (&["python", "py", "triton"], &["python3", "py3"]),
    }
}

/// Every fenced block of `text`, in order.
pub fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(off) = text[pos..].find("```") {
        let start = pos + off;
        let ticks = text[start..].bytes().take_while(|&b| b == b'`').count();
        let after_ticks = start + ticks;
        let line_end = text[after_ticks..]
            .find('\n')
            .map_or(text.len(), |i| after_ticks + i);
        let info = text[after_ticks..line_end].trim();
        if info.contains('`') || line_end == text.len() {
            // Inline code such as ```x``` (skip the rest of its line) or a
            // fence on the last line.
            pos = line_end;
            continue;
        }
        let body_start = line_end + 1;
        let closing = "`".repeat(ticks);
        let (body_end, next, closed) = match text[body_start..].find(&closing) {
            Some(i) => {
                let end = body_start + i;
                let run = text[end..].bytes().take_while(|&b| b == b'`').count();
                (end, end + run, true)
            }
            None => (text.len(), text.len(), false),
        };
        let tag = info
            .split_whitespace()
            .next()
            .map(|t| {
                t.trim_start_matches(['{', '.'])
                    .trim_end_matches('}')
                    .to_ascii_lowercase()
            })
            .filter(|t| !t.is_empty());
        out.push(Fence {
            tag,
            body: text[body_start..body_end].to_string(),
            closed,
        });
        pos = next;
    }
    out
}

fn contains_all<S: AsRef<str>>(body: &str, names: &[S]) -> bool {
    !names.is_empty() && names.iter().all(|n| contains_word(body, n.as_ref()))
}

/// `name` as a whole identifier in `text`.
pub(crate) fn contains_word(text: &str, name: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The candidate block per the module's rules, with the rule that chose it.
pub fn choose<'a, S: AsRef<str>>(
    blocks: &'a [Fence],
    dialect: Dialect,
    entry_points: &[S],
) -> Option<(&'a Fence, FenceRule)> {
    let usable: Vec<&Fence> = blocks
        .iter()
        .filter(|b| b.closed && !b.body.trim().is_empty())
        .collect();
    let (specific, generic) = tags(dialect);
    let tier = |b: &Fence| match b.tag.as_deref() {
        Some(t) if specific.contains(&t) => 2,
        Some(t) if generic.contains(&t) => 1,
        _ => 0,
    };
    let len = |b: &Fence| b.body.trim().len();
    if let Some(b) = usable
        .iter()
        .filter(|b| tier(b) > 0)
        .max_by_key(|b| (contains_all(&b.body, entry_points), tier(b), len(b)))
    {
        return Some((b, FenceRule::DialectTag));
    }
    if let Some(b) = usable
        .iter()
        .filter(|b| contains_all(&b.body, entry_points))
        .max_by_key(|b| len(b))
    {
        return Some((b, FenceRule::EntryPoints));
    }
    usable
        .iter()
        .max_by_key(|b| len(b))
        .map(|b| (*b, FenceRule::Longest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_blocks_tags_and_unclosed_ends() {
        let t = "intro\n```CUDA extra\nA\n```\ntext ```inline``` more\n```\nB\n}```\n```c\nC";
        let f = fences(t);
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f[0].tag.as_deref(), Some("cuda"));
        assert_eq!(f[0].body, "A\n");
        assert_eq!(f[1].tag, None);
        assert_eq!(f[1].body, "B\n}");
        assert!(f[1].closed);
        assert_eq!(f[2].tag.as_deref(), Some("c"));
        assert!(!f[2].closed);
        // Longer fences close only on as many backticks.
        let f = fences("````md\n```cuda\nx\n```\n````\n");
        assert_eq!(f.len(), 1);
        assert!(f[0].body.contains("```cuda"));
    }

    #[test]
    fn whole_word_matching() {
        assert!(contains_word("void saxpy(", "saxpy"));
        assert!(!contains_word("void saxpy2(", "saxpy"));
        assert!(!contains_word("my_saxpy", "saxpy"));
    }

    fn f(tag: Option<&str>, body: &str) -> Fence {
        Fence {
            tag: tag.map(Into::into),
            body: body.into(),
            closed: true,
        }
    }

    #[test]
    fn rules_in_order() {
        let k = ["saxpy"];
        // Rule 1: the dialect tag wins over a longer untagged block, and a
        // tagged block with the entry point wins over a longer tagged one.
        let b = [
            f(None, "void saxpy() { long long long long }"),
            f(Some("cuda"), "helper() { longer longer longer longer }"),
            f(Some("cpp"), "void saxpy() {}"),
        ];
        let (c, r) = choose(&b, Dialect::Cuda, &k).unwrap();
        assert_eq!(
            (c.body.as_str(), r),
            ("void saxpy() {}", FenceRule::DialectTag)
        );
        // OpenCL does not take a `cuda` block by tag.
        let (c, r) = choose(&b, Dialect::OpenCl, &k).unwrap();
        assert_eq!(r, FenceRule::DialectTag);
        assert_eq!(c.body, "void saxpy() {}");
        // Rule 2: any block holding the entry points.
        let b = [
            f(Some("python"), "x = 1 + 2 + 3 + 4 + 5 + 6"),
            f(None, "void saxpy(){}"),
        ];
        assert_eq!(
            choose(&b, Dialect::Cuda, &k).unwrap().1,
            FenceRule::EntryPoints
        );
        // Rule 3: the longest.
        let b = [f(None, "a"), f(Some("text"), "abc")];
        let (c, r) = choose(&b, Dialect::Metal, &k).unwrap();
        assert_eq!((c.body.as_str(), r), ("abc", FenceRule::Longest));
        // Unclosed and empty blocks are never chosen.
        let b = [
            Fence {
                closed: false,
                ..f(Some("cuda"), "void saxpy(){}")
            },
            f(None, "  \n"),
        ];
        assert!(choose(&b, Dialect::Cuda, &k).is_none());
    }
}

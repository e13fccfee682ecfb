//! SEARCH/REPLACE edits against the parent source.
//!
//! ```text
//! <<<<<<< SEARCH
//! lines copied from the parent
//! =======
//! the lines that replace them
//! >>>>>>> REPLACE
//! ```
//!
//! Marker lines are recognised after trimming, with 5 to 9 marker
//! characters (models miscount). Blocks may stand inside or outside code
//! fences. They apply in order, each to the result of the ones before.
//!
//! Matching works on whole lines: the SEARCH text must start at a line
//! start and end at a line end. An exact match is tried first; only when
//! there is none, lines are compared with leading and trailing whitespace
//! trimmed (a model that re-indents the copied lines still applies), and the
//! application reports how many blocks needed that. Zero matches or more
//! than one is a failure of that block.
//!
//! All or nothing: if any block is malformed, does not match, matches more
//! than once, or (with EVOLVE-BLOCK regions) changes text outside them, the
//! whole edit set is rejected and every failing block is listed with its
//! reason. Half-applied edits produce kernels the proposer never intended,
//! and a failure the proposer is told about is one it can fix.

use serde::{Deserialize, Serialize};

use super::evolve;

/// One parsed block; `line` is its 1-based line in the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditBlock {
    pub search: String,
    pub replace: String,
    pub line: usize,
}

/// Why a block failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EditFailureReason {
    /// The markers are out of order or incomplete.
    Malformed { detail: String },
    /// SEARCH is empty or whitespace: it cannot anchor anything.
    EmptySearch,
    /// SEARCH matches nowhere, exactly or with trimmed lines.
    NotFound,
    /// SEARCH matches `count` places.
    Ambiguous { count: usize },
    /// The block changes text outside the EVOLVE-BLOCK regions.
    OutsideEvolveBlock { detail: String },
}

impl std::fmt::Display for EditFailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EditFailureReason::Malformed { detail } => write!(f, "malformed block: {detail}"),
            EditFailureReason::EmptySearch => f.write_str("the SEARCH part is empty"),
            EditFailureReason::NotFound => {
                f.write_str("the SEARCH text does not match the source (whole lines, exact text)")
            }
            EditFailureReason::Ambiguous { count } => write!(
                f,
                "the SEARCH text matches {count} places; include more lines to make it unique"
            ),
            EditFailureReason::OutsideEvolveBlock { detail } => write!(f, "{detail}"),
        }
    }
}

/// A failed block: its number (1-based, in response order), its line in the
/// response, the start of its SEARCH text, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditFailure {
    pub block: usize,
    pub line: usize,
    pub search_head: String,
    pub reason: EditFailureReason,
}

impl std::fmt::Display for EditFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "edit block {} (response line {})", self.block, self.line)?;
        if !self.search_head.is_empty() {
            write!(f, " searching `{}`", self.search_head)?;
        }
        write!(f, ": {}", self.reason)
    }
}

fn marker(line: &str, ch: char, word: &str) -> bool {
    let t = line.trim();
    let n = t.chars().take_while(|&c| c == ch).count();
    (5..=9).contains(&n) && t[n..].trim() == word
}

pub(crate) fn is_search(l: &str) -> bool {
    marker(l, '<', "SEARCH")
}
fn is_divider(l: &str) -> bool {
    marker(l, '=', "")
}
pub(crate) fn is_replace(l: &str) -> bool {
    marker(l, '>', "REPLACE")
}

/// Does the response hold SEARCH/REPLACE edits at all?
pub fn has_edits(response: &str) -> bool {
    response.lines().any(|l| is_search(l) || is_replace(l))
}

fn head(search: &str) -> String {
    let first = search
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    crate::error::snippet(first, 60)
}

/// Parse every block; malformed ones come back as failures, numbered in
/// the same sequence as the good ones.
pub fn parse_edits(response: &str) -> (Vec<(usize, EditBlock)>, Vec<EditFailure>) {
    enum St {
        Out,
        Search(usize, Vec<String>),
        Replace(usize, Vec<String>, Vec<String>),
    }
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    let mut n = 0;
    let mut st = St::Out;
    let malformed = |block: usize, line: usize, search: &str, detail: &str| EditFailure {
        block,
        line,
        search_head: head(search),
        reason: EditFailureReason::Malformed {
            detail: detail.to_string(),
        },
    };
    for (i, line) in response.lines().enumerate() {
        let ln = i + 1;
        st = match st {
            St::Out if is_search(line) => {
                n += 1;
                St::Search(ln, Vec::new())
            }
            St::Out if is_replace(line) => {
                n += 1;
                bad.push(malformed(
                    n,
                    ln,
                    "",
                    "`>>>>>>> REPLACE` without a SEARCH part",
                ));
                St::Out
            }
            St::Out => St::Out,
            St::Search(start, s) if is_divider(line) => St::Replace(start, s, Vec::new()),
            St::Search(start, s) if is_search(line) || is_replace(line) => {
                bad.push(malformed(
                    n,
                    start,
                    &s.join("\n"),
                    "no `=======` line after SEARCH",
                ));
                if is_search(line) {
                    n += 1;
                    St::Search(ln, Vec::new())
                } else {
                    St::Out
                }
            }
            St::Search(start, mut s) => {
                s.push(line.to_string());
                St::Search(start, s)
            }
            St::Replace(start, s, r) if is_replace(line) => {
                ok.push((
                    n,
                    EditBlock {
                        search: s.join("\n"),
                        replace: r.join("\n"),
                        line: start,
                    },
                ));
                St::Out
            }
            St::Replace(start, s, r) if is_search(line) => {
                bad.push(malformed(
                    n,
                    start,
                    &s.join("\n"),
                    "no `>>>>>>> REPLACE` line",
                ));
                n += 1;
                let _ = r;
                St::Search(ln, Vec::new())
            }
            St::Replace(start, s, mut r) => {
                r.push(line.to_string());
                St::Replace(start, s, r)
            }
        };
    }
    match st {
        St::Out => {}
        St::Search(start, s) => bad.push(malformed(
            n,
            start,
            &s.join("\n"),
            "the response ends inside the SEARCH part",
        )),
        St::Replace(start, s, _) => bad.push(malformed(
            n,
            start,
            &s.join("\n"),
            "the response ends before `>>>>>>> REPLACE`",
        )),
    }
    (ok, bad)
}

/// Byte ranges of whole-line exact matches of `needle` in `hay`.
fn exact_matches(hay: &str, needle: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let s = from + i;
        let e = s + needle.len();
        let starts_line = s == 0 || hay.as_bytes()[s - 1] == b'\n';
        let ends_line =
            e == hay.len() || hay.as_bytes()[e] == b'\n' || hay[e..].starts_with("\r\n");
        if starts_line && ends_line {
            out.push((s, e));
        }
        from = s + hay[s..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// Byte ranges of runs of lines equal to `needle`'s lines after trimming.
fn trimmed_matches(hay: &str, needle: &str) -> Vec<(usize, usize)> {
    let want: Vec<&str> = needle.lines().map(str::trim).collect();
    // (start byte, end byte without the newline) of every line.
    let mut lines = Vec::new();
    let mut off = 0;
    for l in hay.split_inclusive('\n') {
        let body = l.strip_suffix('\n').unwrap_or(l);
        lines.push((off, off + body.len(), body.trim()));
        off += l.len();
    }
    if want.is_empty() || want.len() > lines.len() {
        return Vec::new();
    }
    (0..=lines.len() - want.len())
        .filter(|&i| (0..want.len()).all(|j| lines[i + j].2 == want[j]))
        .map(|i| (lines[i].0, lines[i + want.len() - 1].1))
        .collect()
}

/// Apply one block to `source`. `Ok((new source, needed trimmed match))`.
fn apply_one(source: &str, b: &EditBlock) -> Result<(String, bool), EditFailureReason> {
    if b.search.trim().is_empty() {
        return Err(EditFailureReason::EmptySearch);
    }
    let (matches, fuzzy) = match exact_matches(source, &b.search) {
        m if !m.is_empty() => (m, false),
        _ => (trimmed_matches(source, &b.search), true),
    };
    match matches.as_slice() {
        [] => Err(EditFailureReason::NotFound),
        [(s, e)] => {
            let (s, mut e) = (*s, *e);
            // Deleting whole lines takes their line break with them.
            if b.replace.is_empty() && source[e..].starts_with('\n') {
                e += 1;
            }
            Ok((
                format!("{}{}{}", &source[..s], b.replace, &source[e..]),
                fuzzy,
            ))
        }
        m => Err(EditFailureReason::Ambiguous { count: m.len() }),
    }
}

/// The result of a fully applied edit set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub source: String,
    pub blocks: usize,
    /// Blocks that only matched with trimmed lines.
    pub trimmed_matches: usize,
}

/// Apply every edit of `response` to `parent`, all or nothing. `Err`
/// lists every failing block; `Ok(None)` means there were no blocks.
pub fn apply_edits(parent: &str, response: &str) -> Result<Option<Applied>, Vec<EditFailure>> {
    let (blocks, mut failures) = parse_edits(response);
    if blocks.is_empty() && failures.is_empty() {
        return Ok(None);
    }
    let enforce = evolve::has_regions(parent);
    let mut source = parent.to_string();
    let mut fuzzy = 0;
    for (n, b) in &blocks {
        let fail = |reason| EditFailure {
            block: *n,
            line: b.line,
            search_head: head(&b.search),
            reason,
        };
        match apply_one(&source, b) {
            Ok((next, trimmed)) => {
                // Judge each block by itself, so the failure names the block
                // that reached outside the regions.
                if enforce && let Err(detail) = evolve::check(&source, &next) {
                    failures.push(fail(EditFailureReason::OutsideEvolveBlock { detail }));
                    continue;
                }
                fuzzy += usize::from(trimmed);
                source = next;
            }
            Err(reason) => failures.push(fail(reason)),
        }
    }
    if failures.is_empty() {
        Ok(Some(Applied {
            source,
            blocks: blocks.len(),
            trimmed_matches: fuzzy,
        }))
    } else {
        failures.sort_by_key(|f| f.block);
        Err(failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {\n    uint i = get_global_id(0);\n    if (i >= N) return;\n    y[i] = a * x[i] + y[i];\n}\n";

    fn edit(search: &str, replace: &str) -> String {
        format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n")
    }

    #[test]
    fn applies_blocks_in_order() {
        let r = format!(
            "Use fma.\n```opencl\n{}```\n{}",
            edit(
                "    y[i] = a * x[i] + y[i];",
                "    y[i] = fma(a, x[i], y[i]);"
            ),
            edit(
                "    y[i] = fma(a, x[i], y[i]);",
                "    y[i] = mad(a, x[i], y[i]);"
            )
        );
        let a = apply_edits(PARENT, &r).unwrap().unwrap();
        assert_eq!(a.blocks, 2);
        assert_eq!(a.trimmed_matches, 0);
        assert!(a.source.contains("mad(a, x[i], y[i])"));
        assert!(!a.source.contains("a * x[i]"));
    }

    #[test]
    fn trimmed_lines_match_when_exact_does_not() {
        let r = edit(
            "if (i >= N) return;\ny[i] = a * x[i] + y[i];",
            "    if (i < N) y[i] += a * x[i];",
        );
        let a = apply_edits(PARENT, &r).unwrap().unwrap();
        assert_eq!(a.trimmed_matches, 1);
        assert!(
            a.source.contains("    if (i < N) y[i] += a * x[i];\n}"),
            "{}",
            a.source
        );
    }

    #[test]
    fn partial_lines_do_not_match() {
        let e = apply_edits(PARENT, &edit("a * x[i]", "b")).unwrap_err();
        assert_eq!(e[0].reason, EditFailureReason::NotFound);
    }

    #[test]
    fn deleting_lines_removes_their_break() {
        let a = apply_edits(PARENT, &edit("    if (i >= N) return;", ""))
            .unwrap()
            .unwrap();
        assert!(
            a.source.contains("get_global_id(0);\n    y[i]"),
            "{}",
            a.source
        );
    }

    #[test]
    fn every_failure_is_reported_and_nothing_applies() {
        let src = "a\nb\na\nc\n";
        let r = [
            edit("c", "C"),                                     // 1: fine
            edit("zzz", "y"),                                   // 2: not found
            edit("a", "A"),                                     // 3: ambiguous (2 matches)
            edit("   ", "x"),                                   // 4: empty search
            "<<<<<<< SEARCH\nb\n>>>>>>> REPLACE\n".to_string(), // 5: malformed
        ]
        .concat();
        let e = apply_edits(src, &r).unwrap_err();
        let reasons: Vec<_> = e.iter().map(|f| (f.block, f.reason.clone())).collect();
        assert_eq!(
            reasons,
            vec![
                (2, EditFailureReason::NotFound),
                (3, EditFailureReason::Ambiguous { count: 2 }),
                (4, EditFailureReason::EmptySearch),
                (
                    5,
                    EditFailureReason::Malformed {
                        detail: "no `=======` line after SEARCH".into()
                    }
                ),
            ]
        );
        assert_eq!(e[0].search_head, "zzz");
        assert!(e[1].to_string().contains("matches 2 places"), "{}", e[1]);
        assert_eq!(e[0].line, 6);
    }

    #[test]
    fn unterminated_and_stray_markers() {
        let e = apply_edits(PARENT, "<<<<<<< SEARCH\nx\n=======\ny\n").unwrap_err();
        assert!(
            matches!(&e[0].reason, EditFailureReason::Malformed { detail } if detail.contains("ends before"))
        );
        let e = apply_edits(PARENT, ">>>>>>> REPLACE\n").unwrap_err();
        assert_eq!(e[0].block, 1);
        assert_eq!(apply_edits(PARENT, "no edits here"), Ok(None));
    }

    #[test]
    fn evolve_blocks_are_enforced_per_block() {
        let parent =
            "#define W 4\n// EVOLVE-BLOCK-START\nint f() { return W; }\n// EVOLVE-BLOCK-END\n";
        let ok = apply_edits(
            parent,
            &edit("int f() { return W; }", "int f() { return 2 * W; }"),
        )
        .unwrap()
        .unwrap();
        assert!(ok.source.contains("2 * W"));
        let r = [
            edit("int f() { return W; }", "int f() { return 3; }"),
            edit("#define W 4", "#define W 8"),
            edit("// EVOLVE-BLOCK-END", ""),
        ]
        .concat();
        let e = apply_edits(parent, &r).unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(e[0].block, 2);
        assert!(
            matches!(&e[0].reason, EditFailureReason::OutsideEvolveBlock { detail } if detail.contains("#define W 8"))
        );
        assert_eq!(e[1].block, 3);
    }
}

//! The evolvable part of the system prompt: four guidance sections
//! (KernelFoundry's optimisation philosophy, strategies, pitfalls and
//! analysis guidance) that a meta-prompter edits with SEARCH/REPLACE blocks
//! while the kernels evolve.
//!
//! In a stored variant and in the meta-prompter's prompt the sections stand
//! between marker lines:
//!
//! ```text
//! <!-- kevo:evolve strategies -->
//! - Tile stencils in shared memory ...
//! <!-- kevo:end strategies -->
//! ```
//!
//! The generator sees them as headed sections without markers. An edit
//! applies only when its SEARCH text lies inside one section: text outside
//! the sections (the markers, or anything spanning two sections) is not the
//! meta-prompter's to change. Unlike kernel diffs, each block stands on its
//! own: a block is one piece of advice, and one bad block should not throw
//! away the others; the rejected ones are reported back next time.

use serde::{Deserialize, Serialize};

use crate::parse::diff::{EditFailureReason, parse_edits};

/// The sections, in prompt order: name (as in the markers) and heading.
pub const SECTIONS: [(&str, &str); 4] = [
    ("philosophy", "Optimisation philosophy"),
    ("strategies", "Strategies"),
    ("pitfalls", "Pitfalls"),
    ("analysis", "Reading the feedback"),
];

/// A section's largest size in characters: guidance that grows without
/// bound costs tokens in every prompt (4 x 2500 characters is about 2500
/// tokens), and an edit that would pass it is rejected.
pub const MAX_SECTION_CHARS: usize = 2500;

const START: &str = "<!-- kevo:evolve ";
const END: &str = "<!-- kevo:end ";
const CLOSE: &str = " -->";

/// What is wrong with a marked text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuidanceError {
    #[error("line {line}: {message}")]
    Marker { line: usize, message: String },
    #[error("section `{0}` is missing (each of philosophy, strategies, pitfalls, analysis once)")]
    Missing(&'static str),
}

/// The four sections' text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guidance {
    /// Text of each section, in [`SECTIONS`] order, without markers.
    pub sections: Vec<String>,
}

/// One edit block of a meta-prompter's answer that was not applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedEdit {
    /// 1-based, in answer order.
    pub block: usize,
    pub search_head: String,
    pub reason: String,
}

impl std::fmt::Display for RejectedEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "edit block {}", self.block)?;
        if !self.search_head.is_empty() {
            write!(f, " searching `{}`", self.search_head)?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// The result of applying an answer's edits.
#[derive(Debug, Clone, PartialEq)]
pub struct Edited {
    pub guidance: Guidance,
    /// Blocks applied, and in which sections (by name).
    pub applied: Vec<&'static str>,
    pub rejected: Vec<RejectedEdit>,
}

fn marker<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    line.trim()
        .strip_prefix(prefix)?
        .strip_suffix(CLOSE)
        .map(str::trim)
}

impl Guidance {
    /// Parse a marked text: each section exactly once, in any order, no
    /// nesting; text outside the sections is ignored.
    pub fn parse(marked: &str) -> Result<Guidance, GuidanceError> {
        let mut sections: Vec<Option<String>> = vec![None; SECTIONS.len()];
        let mut open: Option<(usize, Vec<&str>)> = None;
        for (i, line) in marked.lines().enumerate() {
            let n = i + 1;
            let err = |message: String| GuidanceError::Marker { line: n, message };
            if let Some(name) = marker(line, START) {
                if open.is_some() {
                    return Err(err(format!("section `{name}` opens inside another")));
                }
                let index = SECTIONS
                    .iter()
                    .position(|(s, _)| *s == name)
                    .ok_or_else(|| err(format!("`{name}` is not a guidance section")))?;
                if sections[index].is_some() {
                    return Err(err(format!("section `{name}` appears twice")));
                }
                open = Some((index, Vec::new()));
            } else if let Some(name) = marker(line, END) {
                let Some((index, lines)) = open.take() else {
                    return Err(err(format!("`{name}` ends without having opened")));
                };
                if SECTIONS[index].0 != name {
                    return Err(err(format!(
                        "section `{}` is closed as `{name}`",
                        SECTIONS[index].0
                    )));
                }
                sections[index] = Some(lines.join("\n").trim().to_string());
            } else if let Some((_, lines)) = &mut open {
                lines.push(line);
            }
        }
        if let Some((index, _)) = open {
            return Err(GuidanceError::Marker {
                line: marked.lines().count(),
                message: format!("section `{}` is never closed", SECTIONS[index].0),
            });
        }
        let sections = sections
            .into_iter()
            .enumerate()
            .map(|(i, s)| s.ok_or(GuidanceError::Missing(SECTIONS[i].0)))
            .collect::<Result<_, _>>()?;
        Ok(Guidance { sections })
    }

    /// The sections between their markers (what a variant stores and the
    /// meta-prompter edits).
    pub fn marked(&self) -> String {
        let mut out = String::new();
        for ((name, _), text) in SECTIONS.iter().zip(&self.sections) {
            out.push_str(&format!(
                "{START}{name}{CLOSE}\n{text}\n{END}{name}{CLOSE}\n\n"
            ));
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    }

    /// The sections as the generator's system prompt shows them.
    pub fn rendered(&self) -> String {
        let mut out = String::new();
        for ((_, heading), text) in SECTIONS.iter().zip(&self.sections) {
            if text.trim().is_empty() {
                continue;
            }
            out.push_str(&format!("### {heading}\n\n{text}\n\n"));
        }
        out.trim_end().to_string()
    }

    /// Apply the SEARCH/REPLACE blocks of `answer`, each on its own, in
    /// order: a block applies when its SEARCH lines occur exactly once
    /// across the sections' text (exactly, else with each line trimmed)
    /// and its REPLACE holds no marker and keeps the section within
    /// [`MAX_SECTION_CHARS`].
    pub fn apply(&self, answer: &str) -> Edited {
        let (blocks, malformed) = parse_edits(answer);
        let mut rejected: Vec<RejectedEdit> = malformed
            .into_iter()
            .map(|f| RejectedEdit {
                block: f.block,
                search_head: f.search_head,
                reason: f.reason.to_string(),
            })
            .collect();
        let mut guidance = self.clone();
        let mut applied = Vec::new();
        for (number, block) in blocks {
            let head = block
                .search
                .lines()
                .find(|l| !l.trim().is_empty())
                .map(|l| crate::error::snippet(l.trim(), 60))
                .unwrap_or_default();
            let reject = |reason: String| RejectedEdit {
                block: number,
                search_head: head.clone(),
                reason,
            };
            match guidance.apply_block(&block.search, &block.replace) {
                Ok(section) => applied.push(section),
                Err(reason) => rejected.push(reject(reason)),
            }
        }
        rejected.sort_by_key(|r| r.block);
        Edited {
            guidance,
            applied,
            rejected,
        }
    }

    fn apply_block(&mut self, search: &str, replace: &str) -> Result<&'static str, String> {
        if search.trim().is_empty() {
            return Err(EditFailureReason::EmptySearch.to_string());
        }
        if replace.contains(START.trim()) || replace.contains(END.trim()) {
            return Err(
                "the REPLACE part holds a section marker: sections are not added, removed or renamed"
                    .into(),
            );
        }
        let needle: Vec<&str> = search.lines().collect();
        let mut found = Vec::new();
        for trimmed in [false, true] {
            for (s, text) in self.sections.iter().enumerate() {
                let lines: Vec<&str> = text.lines().collect();
                for start in 0..lines.len() {
                    if start + needle.len() <= lines.len()
                        && lines[start..start + needle.len()]
                            .iter()
                            .zip(&needle)
                            .all(|(a, b)| {
                                if trimmed {
                                    a.trim() == b.trim()
                                } else {
                                    a.trim_end() == b.trim_end()
                                }
                            })
                    {
                        found.push((s, start));
                    }
                }
            }
            if !found.is_empty() {
                break;
            }
        }
        match found.as_slice() {
            [] => {
                let marked = self.marked();
                let anywhere = needle
                    .iter()
                    .filter(|l| !l.trim().is_empty())
                    .any(|l| marker(l, START).is_some() || marker(l, END).is_some())
                    || marked.contains(search.trim());
                Err(if anywhere {
                    "the SEARCH text is outside the evolvable sections (it spans a marker or two sections): only the text between a section's markers may change".into()
                } else {
                    EditFailureReason::NotFound.to_string()
                })
            }
            [(s, start)] => {
                let lines: Vec<&str> = self.sections[*s].lines().collect();
                let mut text: Vec<&str> = lines[..*start].to_vec();
                text.extend(replace.lines());
                text.extend(&lines[start + needle.len()..]);
                let text = text.join("\n").trim().to_string();
                if text.chars().count() > MAX_SECTION_CHARS {
                    return Err(format!(
                        "section `{}` would grow to {} characters, over its limit of {MAX_SECTION_CHARS}: shorten or replace advice instead of adding",
                        SECTIONS[*s].0,
                        text.chars().count()
                    ));
                }
                self.sections[*s] = text;
                Ok(SECTIONS[*s].0)
            }
            many => Err(EditFailureReason::Ambiguous { count: many.len() }.to_string()),
        }
    }
}

/// The meta-prompter's diagnosis: the prose of its answer before the first
/// edit block, at most `max` characters.
pub fn diagnosis(answer: &str, max: usize) -> String {
    let prose: Vec<&str> = answer
        .lines()
        .take_while(|l| !crate::parse::diff::is_search(l))
        .filter(|l| !l.trim_start().starts_with("```"))
        .collect();
    let text = prose.join("\n").trim().to_string();
    crate::error::snippet(&text, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Guidance {
        Guidance::parse(
            "intro outside\n\
             <!-- kevo:evolve philosophy -->\nMeasure first.\nThen change one thing.\n<!-- kevo:end philosophy -->\n\
             <!-- kevo:evolve strategies -->\n- Tile in shared memory.\n- Vectorise loads.\n<!-- kevo:end strategies -->\n\
             <!-- kevo:evolve pitfalls -->\n- Races on shared memory.\n<!-- kevo:end pitfalls -->\n\
             <!-- kevo:evolve analysis -->\nA low fraction means headroom.\n<!-- kevo:end analysis -->\n",
        )
        .unwrap()
    }

    fn block(search: &str, replace: &str) -> String {
        format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n")
    }

    #[test]
    fn marked_text_round_trips_and_renders_without_markers() {
        let g = sample();
        assert_eq!(Guidance::parse(&g.marked()).unwrap(), g);
        let r = g.rendered();
        assert!(r.starts_with("### Optimisation philosophy\n\nMeasure first."));
        assert!(!r.contains("kevo:"), "{r}");
        assert!(r.contains("### Reading the feedback"));
    }

    #[test]
    fn bad_markers_are_named_with_their_line() {
        let e = Guidance::parse("<!-- kevo:evolve tactics -->\nx\n<!-- kevo:end tactics -->")
            .unwrap_err();
        assert!(e.to_string().contains("line 1") && e.to_string().contains("tactics"));
        let e = Guidance::parse("<!-- kevo:evolve pitfalls -->\nx\n").unwrap_err();
        assert!(e.to_string().contains("never closed"), "{e}");
        let mut text = sample().marked();
        text = text.replace("<!-- kevo:end analysis -->\n", "");
        assert!(Guidance::parse(&text).is_err());
        let missing = sample().marked().replace("pitfalls", "pitfall");
        assert!(Guidance::parse(&missing).is_err());
    }

    #[test]
    fn edits_apply_inside_sections_and_nowhere_else() {
        let g = sample();
        let answer = format!(
            "The strategies omit warp shuffles.\n\n{}{}{}{}",
            // Inside a section: applies.
            block(
                "- Vectorise loads.",
                "- Vectorise loads.\n- Reduce with warp shuffles."
            ),
            // Spans the end of one section and the start of the next.
            block(
                "- Vectorise loads.\n<!-- kevo:end strategies -->",
                "- Vectorise loads."
            ),
            // Tries to rename a section through its REPLACE.
            block(
                "A low fraction means headroom.",
                "<!-- kevo:end analysis -->\n<!-- kevo:evolve tactics -->"
            ),
            // Matches nothing.
            block("Use tensor cores everywhere.", "x"),
        );
        let edited = g.apply(&answer);
        assert_eq!(edited.applied, ["strategies"]);
        assert_eq!(
            edited.guidance.sections[1],
            "- Tile in shared memory.\n- Vectorise loads.\n- Reduce with warp shuffles."
        );
        // Everything else is as it was.
        for i in [0, 2, 3] {
            assert_eq!(edited.guidance.sections[i], g.sections[i]);
        }
        let reasons: Vec<(usize, &str)> = edited
            .rejected
            .iter()
            .map(|r| (r.block, r.reason.as_str()))
            .collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(reasons[0].1.contains("outside the evolvable sections"));
        assert!(reasons[1].1.contains("marker"));
        assert!(reasons[2].1.contains("does not match"));
        assert_eq!(
            diagnosis(&answer, 200),
            "The strategies omit warp shuffles."
        );
    }

    #[test]
    fn ambiguous_and_oversized_edits_are_rejected() {
        let mut g = sample();
        g.sections[2] = "- x\n- x".into();
        let edited = g.apply(&block("- x", "- y"));
        assert!(edited.rejected[0].reason.contains("2 places"), "{edited:?}");
        let huge = "a".repeat(MAX_SECTION_CHARS + 1);
        let edited = g.apply(&block("Measure first.", &huge));
        assert!(edited.rejected[0].reason.contains("limit"), "{edited:?}");
        assert_eq!(edited.guidance, g);
    }

    #[test]
    fn reindented_search_text_still_applies() {
        let g = sample();
        let edited = g.apply(&block(
            "   - Races on shared memory.",
            "- Races on shared memory: barrier between phases.",
        ));
        assert_eq!(edited.applied, ["pitfalls"]);
    }
}

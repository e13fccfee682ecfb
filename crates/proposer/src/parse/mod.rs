//! From a response to kernel source.
//!
//! [`extract`] decides in this order:
//! 1. An empty response is [`Extraction::NoCode`].
//! 2. If the response holds SEARCH/REPLACE markers, it is an edit set
//!    against the parent ([`diff`]): applied all or nothing, or
//!    [`Extraction::EditsRejected`] listing every failing block.
//! 3. Otherwise a fenced block is chosen ([`fence`]); none gives
//!    [`Extraction::NoCode`] with the reason (none at all, or only an
//!    unclosed one, which usually means the response hit its token limit).
//! 4. A full rewrite of a parent with `EVOLVE-BLOCK` regions that changes
//!    text outside them is [`Extraction::OutsideEvolveBlocks`].
//!
//! Every failure carries a reason for the proposer's next prompt and maps
//! onto the evaluator's `Outcome::NoCode`.

pub mod describe;
pub mod diff;
pub mod evolve;
pub mod fence;

use kevo_backend::Dialect;
use kevo_eval::Outcome;
use serde::{Deserialize, Serialize};

pub use describe::description;
pub use diff::{Applied, EditBlock, EditFailure, EditFailureReason, apply_edits, has_edits};
pub use fence::{Fence, FenceRule, choose, fences};

/// What the extraction needs to know.
#[derive(Debug, Clone, Copy)]
pub struct ExtractOptions<'a> {
    pub dialect: Dialect,
    /// The task's entry points, used to recognise the kernel's block.
    pub kernel_names: &'a [String],
    /// The source edits apply to, and whose EVOLVE-BLOCK regions bind.
    pub parent: Option<&'a str>,
}

/// How the source was obtained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Method {
    Fence {
        tag: Option<String>,
        rule: FenceRule,
    },
    Edits {
        blocks: usize,
        /// Blocks that matched only with trimmed lines.
        trimmed_matches: usize,
    },
}

/// The result of reading one response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Extraction {
    Code {
        source: String,
        method: Method,
    },
    NoCode {
        reason: String,
    },
    /// At least one edit failed, so none was applied.
    EditsRejected {
        failures: Vec<EditFailure>,
        /// Blocks in the response, failed or not.
        total: usize,
    },
    /// A full rewrite changed text outside the parent's EVOLVE-BLOCK regions.
    OutsideEvolveBlocks {
        reason: String,
    },
}

impl Extraction {
    pub fn source(&self) -> Option<&str> {
        match self {
            Extraction::Code { source, .. } => Some(source),
            _ => None,
        }
    }

    /// Why there is no source; `None` when there is.
    pub fn failure_reason(&self) -> Option<String> {
        match self {
            Extraction::Code { .. } => None,
            Extraction::NoCode { reason } => Some(reason.clone()),
            Extraction::OutsideEvolveBlocks { reason } => Some(format!(
                "rejected: {reason} (only text inside EVOLVE-BLOCK regions may change)"
            )),
            Extraction::EditsRejected { failures, total } => Some(format!(
                "{} of {total} SEARCH/REPLACE block(s) failed, so none was applied:\n{}",
                failures.len(),
                failures
                    .iter()
                    .map(|f| format!("- {f}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )),
        }
    }

    /// The evaluator outcome of a response without usable source.
    pub fn outcome(&self) -> Option<Outcome> {
        self.failure_reason()
            .map(|reason| Outcome::NoCode { reason })
    }
}

/// Read `response` per the module's rules.
pub fn extract(response: &str, opts: &ExtractOptions<'_>) -> Extraction {
    if response.trim().is_empty() {
        return Extraction::NoCode {
            reason: "the response is empty".into(),
        };
    }
    if has_edits(response) {
        let Some(parent) = opts.parent else {
            return Extraction::NoCode {
                reason: "the response holds SEARCH/REPLACE edits but there is no parent source to apply them to".into(),
            };
        };
        let total = diff::parse_edits(response);
        let total = total.0.len() + total.1.len();
        return match apply_edits(parent, response) {
            Ok(Some(a)) => Extraction::Code {
                source: a.source,
                method: Method::Edits {
                    blocks: a.blocks,
                    trimmed_matches: a.trimmed_matches,
                },
            },
            Ok(None) => unreachable!("has_edits found markers"),
            Err(failures) => Extraction::EditsRejected { failures, total },
        };
    }
    let blocks = fences(response);
    let Some((block, rule)) = choose(&blocks, opts.dialect, opts.kernel_names) else {
        let reason = if blocks
            .iter()
            .any(|b| !b.closed && !b.body.trim().is_empty())
        {
            "the code block is not closed (the response may have hit its token limit)".to_string()
        } else if blocks.is_empty() {
            format!(
                "no fenced code block (```{}) in the response",
                opts.dialect.fence_tag()
            )
        } else {
            "every fenced code block in the response is empty".to_string()
        };
        return Extraction::NoCode { reason };
    };
    let source = format!("{}\n", block.body.trim_matches('\n').trim_end());
    if let Some(parent) = opts.parent
        && let Err(reason) = evolve::check(parent, &source)
    {
        return Extraction::OutsideEvolveBlocks { reason };
    }
    Extraction::Code {
        source,
        method: Method::Fence {
            tag: block.tag.clone(),
            rule,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(parent: Option<&str>) -> ExtractOptions<'_> {
        static SAXPY: std::sync::LazyLock<[String; 1]> =
            std::sync::LazyLock::new(|| ["saxpy".to_string()]);
        ExtractOptions {
            dialect: Dialect::Cuda,
            kernel_names: &*SAXPY,
            parent,
        }
    }

    #[test]
    fn full_source_from_a_fence() {
        let r = "I vectorised it.\n```cuda\nextern \"C\" __global__ void saxpy() {}\n```\nDone.";
        let e = extract(r, &opts(None));
        assert_eq!(
            e.source(),
            Some("extern \"C\" __global__ void saxpy() {}\n")
        );
        assert_eq!(
            e,
            Extraction::Code {
                source: "extern \"C\" __global__ void saxpy() {}\n".into(),
                method: Method::Fence {
                    tag: Some("cuda".into()),
                    rule: FenceRule::DialectTag
                }
            }
        );
        assert!(e.outcome().is_none());
    }

    #[test]
    fn no_code_has_its_reasons() {
        for (r, needle) in [
            ("   ", "empty"),
            ("Sorry, I cannot help.", "no fenced code block (```cuda)"),
            ("```cuda\nvoid saxpy() {", "not closed"),
            ("```cuda\n\n```", "empty"),
        ] {
            let e = extract(r, &opts(None));
            let reason = e.failure_reason().unwrap();
            assert!(reason.contains(needle), "{r:?}: {reason}");
            assert!(matches!(e.outcome(), Some(Outcome::NoCode { .. })));
        }
    }

    #[test]
    fn edits_need_a_parent_and_report_failures() {
        let r = "<<<<<<< SEARCH\nzzz\n=======\ny\n>>>>>>> REPLACE\n";
        assert!(matches!(extract(r, &opts(None)), Extraction::NoCode { .. }));
        let e = extract(r, &opts(Some("a\nb\n")));
        let Extraction::EditsRejected { failures, total } = &e else {
            panic!("{e:?}")
        };
        assert_eq!((failures.len(), *total), (1, 1));
        let reason = e.failure_reason().unwrap();
        assert!(
            reason.contains("1 of 1") && reason.contains("zzz"),
            "{reason}"
        );
        let ok = extract(
            "<<<<<<< SEARCH\nb\n=======\nc\n>>>>>>> REPLACE",
            &opts(Some("a\nb\n")),
        );
        assert_eq!(ok.source(), Some("a\nc\n"));
    }

    #[test]
    fn rewrites_must_respect_evolve_blocks() {
        let parent = "#define W 4\n// EVOLVE-BLOCK-START\nvoid saxpy() {}\n// EVOLVE-BLOCK-END\n";
        let good = format!("```cuda\n{}```", parent.replace("{}", "{ work(); }"));
        assert!(extract(&good, &opts(Some(parent))).source().is_some());
        let bad = format!("```cuda\n{}```", parent.replace("4", "8"));
        let e = extract(&bad, &opts(Some(parent)));
        assert!(matches!(e, Extraction::OutsideEvolveBlocks { .. }), "{e:?}");
        assert!(e.failure_reason().unwrap().contains("#define W 8"));
    }
}

//! The performance-analysis agent (KForge's second model): it reads one
//! kernel with what was measured of it (per-size results against the
//! roofline, the compiler's resource report, an Nsight Compute summary when
//! the run profiles) and answers with one prioritised recommendation, which
//! the generator's next prompt shows.
//!
//! The analyst sees exactly what the generator may see: the same size plan,
//! the same held-out checks on the evaluation and the profile. Its answer
//! is the model's own words, so one that names the held-out size (a guess)
//! is withheld from the generator rather than failing the run.

use kevo_eval::Evaluation;
use serde::Serialize;

use super::{DeviceCtx, DialectCtx, PromptBuilder, PromptError, TaskCtx};
use crate::types::ChatRequest;

/// The longest recommendation passed on, in characters: the analyst is
/// asked for at most 120 words (about 800 characters); a longer answer is
/// cut at a sentence end so that it cannot crowd the generator's prompt.
pub const MAX_ANALYSIS_CHARS: usize = 1200;

/// Output-token limit of an analyst call: 120 words of prose need about
/// 200 tokens; the rest leaves room for a reasoning model's thinking.
pub const ANALYST_MAX_TOKENS: u32 = 4096;

/// What the analyst is shown.
#[derive(Debug, Clone, Copy)]
pub struct AnalystContext<'a> {
    pub source: &'a str,
    pub evaluation: &'a Evaluation,
    /// The Nsight Compute summary, when the run profiles.
    pub profile: Option<&'a str>,
    /// How the generator's prompt calls this kernel: "seed", "incumbent"
    /// or "parent".
    pub role: &'a str,
}

#[derive(Serialize)]
struct AnalysedCtx {
    source: String,
    feedback: String,
    role: String,
}

#[derive(Serialize)]
struct AnalystUserCtx<'a> {
    task: TaskCtx<'a>,
    dialect: DialectCtx,
    device: DeviceCtx,
    kernel: AnalysedCtx,
    profile: Option<String>,
}

#[derive(Serialize)]
struct AnalystSystemCtx {
    dialect: DialectCtx,
    has_profile: bool,
}

impl PromptBuilder<'_> {
    /// The analyst's request about one kernel: `analyst_system.j2` and
    /// `analyst_user.j2`, after the same held-out checks as the
    /// generator's prompt.
    pub fn analyst_request(&self, ctx: &AnalystContext<'_>) -> Result<ChatRequest, PromptError> {
        let feedback = self.feedback(ctx.evaluation, "analysed kernel")?;
        if let Some(p) = ctx.profile {
            self.guard_text(p, "profile")?;
        }
        let system = self.templates.render(
            "analyst_system.j2",
            &AnalystSystemCtx {
                dialect: super::dialect_ctx(self.dialect),
                has_profile: ctx.profile.is_some(),
            },
        )?;
        let user = self.templates.render(
            "analyst_user.j2",
            &AnalystUserCtx {
                task: self.task_ctx(),
                dialect: super::dialect_ctx(self.dialect),
                device: self.device_ctx(),
                kernel: AnalysedCtx {
                    source: ctx.source.trim_end().to_string(),
                    feedback: feedback.text,
                    role: ctx.role.to_string(),
                },
                profile: ctx.profile.map(|p| p.trim_end().to_string()),
            },
        )?;
        let mut request = ChatRequest::new(system, user);
        request.max_tokens = Some(ANALYST_MAX_TOKENS);
        Ok(request)
    }

    /// An analysis as the generator's prompt may show it: `None` when it
    /// names the held-out or a validation size (the analyst never saw
    /// them; naming one is a guess that must not reach the generator
    /// either).
    pub fn shown_analysis(&self, analysis: &str) -> Option<String> {
        (!self.names_hidden(analysis)).then(|| analysis.to_string())
    }
}

/// The recommendation in an analyst's answer: fenced code blocks dropped
/// (it is asked for prose; code is the generator's job), whitespace
/// tidied, and at most [`MAX_ANALYSIS_CHARS`], cut at a sentence end.
/// `None` when nothing is left.
pub fn recommendation(answer: &str) -> Option<String> {
    let mut prose = Vec::new();
    let mut in_fence = false;
    for line in answer.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            prose.push(line.trim_end());
        }
    }
    // Paragraphs kept, runs of blank lines collapsed.
    let mut text = String::new();
    let mut blank = false;
    for line in prose {
        if line.trim().is_empty() {
            blank = !text.is_empty();
            continue;
        }
        if blank {
            text.push_str("\n\n");
        } else if !text.is_empty() {
            text.push('\n');
        }
        blank = false;
        text.push_str(line);
    }
    if text.is_empty() {
        return None;
    }
    if text.chars().count() <= MAX_ANALYSIS_CHARS {
        return Some(text);
    }
    let cut: String = text.chars().take(MAX_ANALYSIS_CHARS).collect();
    let end = cut
        .rfind(". ")
        .or_else(|| cut.rfind(".\n"))
        .map(|i| i + 1)
        .filter(|&i| i > MAX_ANALYSIS_CHARS / 2)
        .unwrap_or(cut.len());
    Some(format!("{} [...]", cut[..end].trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_dropped_and_paragraphs_kept() {
        let answer =
            "Use float4 loads.\n\n\n```cuda\nfloat4 v = x4[i];\n```\nDRAM is at 45% of peak.\n";
        assert_eq!(
            recommendation(answer).unwrap(),
            "Use float4 loads.\n\nDRAM is at 45% of peak."
        );
        assert_eq!(recommendation("```\nonly code\n```\n  \n"), None);
        assert_eq!(recommendation(""), None);
    }

    #[test]
    fn a_long_answer_is_cut_at_a_sentence() {
        let sentence = "Tile the loop over j into shared memory of 256 bodies. ";
        let long = sentence.repeat(40);
        let r = recommendation(&long).unwrap();
        assert!(r.chars().count() <= MAX_ANALYSIS_CHARS + 6, "{}", r.len());
        assert!(r.ends_with("bodies. [...]"), "{r}");
        // No sentence end in reach: cut at the limit.
        let r = recommendation(&"x".repeat(5000)).unwrap();
        assert_eq!(r.chars().count(), MAX_ANALYSIS_CHARS + 6);
    }
}

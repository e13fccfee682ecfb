//! The user prompt: the incumbent and the previous attempt with their
//! feedback, the last history records, the search's elites, inspirations
//! and hints, and the stagnation notice, each guarded against sizes the
//! proposer never sees, then cut to the context budget.

use serde::Serialize;

use super::{
    Attempt, CHARS_PER_TOKEN, DeviceCtx, DialectCtx, FAILS_UNSEEN, Feedback, HistoryEntry,
    PromptBuilder, PromptError, TaskCtx, UserContext, dialect_ctx, history_line, is_stagnating,
    kind_name,
};
use crate::parse::evolve;

#[derive(Serialize)]
struct AttemptCtx {
    source: String,
    feedback: String,
    outcome: String,
    failed: bool,
    is_seed: bool,
    same_as_previous: bool,
    /// Shown as the best so far ("incumbent") or as the search's parent.
    is_best: bool,
    role: &'static str,
}

#[derive(Serialize)]
struct StagnationCtx {
    window: usize,
    gap_pct: String,
    best: String,
}

#[derive(Serialize)]
struct UserCtx<'a> {
    task: TaskCtx<'a>,
    dialect: DialectCtx,
    device: DeviceCtx,
    previous: Option<AttemptCtx>,
    incumbent: AttemptCtx,
    history: Vec<String>,
    history_total: usize,
    elites: Vec<AttemptCtx>,
    inspirations: Vec<AttemptCtx>,
    hints: Vec<String>,
    stagnation: Option<StagnationCtx>,
    edit_mode: &'static str,
    evolve_blocks: bool,
    device_kind: &'static str,
    reference: Option<ReferenceCtx>,
    analysis: Option<String>,
    search: Option<&'a super::SearchBrief>,
}

#[derive(Serialize)]
struct ReferenceCtx {
    dialect: String,
    tag: &'static str,
    origin: String,
    source: String,
}

impl PromptBuilder<'_> {
    /// The user prompt for the next candidate.
    pub fn user(&self, ctx: &UserContext<'_>) -> Result<String, PromptError> {
        let inc_fb = self.incumbent_feedback(ctx)?;
        let same = ctx
            .previous
            .is_some_and(|p| p.source.trim() == ctx.incumbent.source.trim());
        let previous = self.previous_ctx(ctx)?;
        let history = self.history_lines(ctx)?;
        let stagnation = self.stagnation_ctx(ctx);
        let elites = self.shown_attempts(ctx.elites, "elite")?;
        let inspirations = self.shown_attempts(ctx.inspirations, "inspiration")?;
        for h in ctx.hints {
            self.guard_text(h, "hint")?;
        }
        let user = UserCtx {
            task: self.task_ctx(),
            dialect: dialect_ctx(self.dialect),
            device: self.device_ctx(),
            incumbent: incumbent_ctx(ctx, inc_fb, same),
            previous,
            history,
            history_total: ctx.history.len(),
            elites,
            inspirations,
            hints: ctx.hints.to_vec(),
            stagnation,
            edit_mode: self.mode_name(),
            evolve_blocks: evolve::has_regions(ctx.incumbent.source),
            device_kind: kind_name(self.device_kind()),
            reference: self.reference_ctx()?,
            analysis: ctx.analysis.and_then(|a| self.shown_analysis(a.trim_end())),
            search: ctx.search,
        };
        self.render_within_budget(user)
    }

    /// The incumbent's feedback packet, with its profile and, where
    /// re-measurement replaced its first score (by more than 1e-9
    /// relative), the score the search holds.
    fn incumbent_feedback(&self, ctx: &UserContext<'_>) -> Result<Feedback, PromptError> {
        let mut inc_fb = self.feedback(ctx.incumbent.evaluation, "incumbent")?;
        if let Some(profile) = ctx.incumbent_profile {
            self.guard_text(profile, "profile")?;
            inc_fb.text.push_str("\n\n");
            inc_fb.text.push_str(profile.trim_end());
        }
        let first = ctx.incumbent.evaluation.outcome.score();
        if let (Some(held), Some(first)) = (ctx.incumbent_score, first)
            && (held - first).abs() > 1e-9 * first.abs().max(1e-300)
        {
            inc_fb.text.push_str(&format!(
                "\nscore after re-measurement (median of interleaved rounds against the kernel it was compared with): {held:.4}; the lines above are its first evaluation"
            ));
        }
        Ok(inc_fb)
    }

    /// The previous attempt as shown, with its profile; one the validation
    /// gate rejected is shown as failing on unseen sizes.
    fn previous_ctx(&self, ctx: &UserContext<'_>) -> Result<Option<AttemptCtx>, PromptError> {
        let Some(p) = ctx.previous else {
            return Ok(None);
        };
        let mut fb = self.feedback(p.evaluation, "previous attempt")?;
        if let Some(profile) = ctx.previous_profile {
            self.guard_text(profile, "profile")?;
            fb.text.push_str("\n\n");
            fb.text.push_str(profile.trim_end());
        }
        if ctx.previous_rejected {
            fb.text.push_str(&format!("\n\nNot kept: {FAILS_UNSEEN}."));
            fb.summary = "fails on unseen sizes".into();
            fb.failed = true;
        }
        Ok(Some(AttemptCtx {
            source: p.source.trim_end().to_string(),
            feedback: fb.text,
            outcome: fb.summary,
            failed: fb.failed,
            is_seed: false,
            same_as_previous: true,
            is_best: false,
            role: "previous attempt",
        }))
    }

    /// The last `history_len` history records (8 by default), one line
    /// each, guarded as a whole.
    fn history_lines(&self, ctx: &UserContext<'_>) -> Result<Vec<String>, PromptError> {
        let start = ctx.history.len().saturating_sub(self.history_len);
        // A note is the model's own words: one that names a hidden size
        // (a guess, or an echo) is withheld, not an error that would end
        // the run; so is a reason (a compiler may echo the model's words);
        // anything else naming it still fails the guard.
        let withheld = |text: &Option<String>, what: &str| match text {
            Some(t) if self.names_hidden(t) => {
                Some(format!("({what} withheld: it names a size not shown)"))
            }
            other => other.clone(),
        };
        let history: Vec<String> = ctx.history[start..]
            .iter()
            .map(|e| {
                history_line(&HistoryEntry {
                    note: withheld(&e.note, "description"),
                    reason: withheld(&e.reason, "reason"),
                    ..e.clone()
                })
            })
            .collect();
        self.guard_text(&history.join("\n"), "history")?;
        Ok(history)
    }

    /// Metal-Sci's stagnation notice, when the search is stuck.
    fn stagnation_ctx(&self, ctx: &UserContext<'_>) -> Option<StagnationCtx> {
        let best = ctx.incumbent.evaluation.outcome.score();
        is_stagnating(ctx.history, best, self.stagnation).then(|| StagnationCtx {
            window: self.stagnation.window,
            gap_pct: format!("{}", (self.stagnation.gap * 100.0 * 10.0).round() / 10.0),
            best: format!("{:.4}", best.unwrap_or(0.0)),
        })
    }

    /// Elites or inspirations (`what`) as shown, each with its feedback.
    fn shown_attempts(
        &self,
        attempts: &[Attempt<'_>],
        what: &str,
    ) -> Result<Vec<AttemptCtx>, PromptError> {
        attempts
            .iter()
            .map(|a| {
                let fb = self.feedback(a.evaluation, what)?;
                Ok(AttemptCtx {
                    source: a.source.trim_end().to_string(),
                    feedback: fb.text,
                    outcome: fb.summary,
                    failed: fb.failed,
                    is_seed: false,
                    same_as_previous: false,
                    is_best: false,
                    role: "elite",
                })
            })
            .collect()
    }

    /// The reference kernel from another dialect or device, if any, after
    /// the held-out checks.
    fn reference_ctx(&self) -> Result<Option<ReferenceCtx>, PromptError> {
        let Some(r) = &self.reference else {
            return Ok(None);
        };
        self.guard_text(&r.source, "reference kernel")?;
        self.guard_text(&r.origin, "reference kernel")?;
        Ok(Some(ReferenceCtx {
            dialect: r.dialect.to_string(),
            tag: r.dialect.fence_tag(),
            origin: r.origin.clone(),
            source: r.source.trim_end().to_string(),
        }))
    }

    /// `user.j2` rendered within the context budget (tokens as characters
    /// / 4): inspirations go first, then elites, from the end of each list.
    fn render_within_budget(&self, mut user: UserCtx<'_>) -> Result<String, PromptError> {
        let budget = self.context_budget_tokens.saturating_mul(CHARS_PER_TOKEN);
        loop {
            let text = self.templates.render("user.j2", &user)?;
            if text.len() <= budget || (user.inspirations.is_empty() && user.elites.is_empty()) {
                return Ok(text);
            }
            if user.inspirations.pop().is_none() {
                user.elites.pop();
            }
        }
    }
}

/// The incumbent as shown: the best so far ("incumbent"), or the parent a
/// search strategy chose.
fn incumbent_ctx(ctx: &UserContext<'_>, inc_fb: Feedback, same: bool) -> AttemptCtx {
    AttemptCtx {
        source: ctx.incumbent.source.trim_end().to_string(),
        feedback: inc_fb.text,
        outcome: inc_fb.summary,
        failed: inc_fb.failed,
        is_seed: ctx.incumbent_is_seed,
        same_as_previous: same,
        is_best: ctx.incumbent_is_best,
        role: if ctx.incumbent_is_best {
            "incumbent"
        } else {
            "parent"
        },
    }
}

//! Prompts that evolve with the kernels (KernelFoundry's meta-prompting):
//! every few proposals a meta-prompter model reads the guidance sections
//! of the system prompt with the recent candidates and their outcomes,
//! diagnoses what guidance was missing or misleading, and edits the
//! sections ([`super::guidance`]). Each edited text is a variant in the
//! run's [`PromptArchive`], whose fitness is the best score of the kernels
//! generated with it; each proposal samples a variant, best-biased with
//! exploration.

use serde::{Deserialize, Serialize};

use super::guidance::{Guidance, RejectedEdit};
use super::{DeviceCtx, DialectCtx, PromptBuilder, PromptError, TaskCtx};
use crate::types::ChatRequest;

/// Output-token limit of a meta-prompter call: a diagnosis and a few edit
/// blocks need about 1000 tokens; the rest is room for reasoning.
pub const META_MAX_TOKENS: u32 = 8192;

/// Proposals a new variant gets before its fitness counts: a variant that
/// was never tried, or tried once and unlucky, is not judged yet.
pub const TRIALS: u32 = 2;

/// The chance that a proposal samples a variant uniformly instead of the
/// fittest: enough that an early leader's rivals keep getting proposals,
/// little enough that the best prompt does most of the work.
pub const EXPLORE: f64 = 0.2;

/// The longest diagnosis kept with a variant, in characters.
pub const MAX_DIAGNOSIS_CHARS: usize = 1500;

/// One prompt variant: its guidance and what it produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptVariant {
    pub id: u32,
    /// The variant it was edited from; None for the starting text.
    pub parent: Option<u32>,
    /// The proposal before which the meta-prompter made it (0: the
    /// starting text).
    pub created_at: u32,
    /// The sections, marked ([`Guidance::marked`]).
    pub guidance: String,
    /// The meta-prompter's diagnosis that led to it.
    #[serde(default)]
    pub diagnosis: String,
    /// Sections the edits changed.
    #[serde(default)]
    pub edited: Vec<String>,
    /// Proposals made with it.
    pub uses: u32,
    /// Candidates it produced, by stored id.
    pub candidates: Vec<i64>,
    /// The best score of a correct kernel it produced.
    pub fitness: Option<f64>,
    /// The candidate of that score.
    pub best_candidate: Option<i64>,
}

/// The run's prompt variants and the state of their sampling: plain data,
/// stored with every checkpoint, so a resumed run samples as an
/// uninterrupted one would.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptArchive {
    pub variants: Vec<PromptVariant>,
    /// SplitMix64 state of the sampling.
    pub rng: u64,
    /// Meta-prompter calls made so far, answered or not: a resumed run
    /// reuses the answers of the calls stored after this count.
    pub meta_calls: u32,
    /// Edits of the last call that were not applied, told to the next.
    #[serde(default)]
    pub rejected: Vec<RejectedEdit>,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl PromptArchive {
    /// An archive holding the starting guidance as variant 0.
    pub fn new(start: &Guidance, seed: u64) -> PromptArchive {
        PromptArchive {
            variants: vec![PromptVariant {
                id: 0,
                parent: None,
                created_at: 0,
                guidance: start.marked(),
                diagnosis: String::new(),
                edited: Vec::new(),
                uses: 0,
                candidates: Vec::new(),
                fitness: None,
                best_candidate: None,
            }],
            rng: seed ^ 0x6D65_7461,
            meta_calls: 0,
            rejected: Vec::new(),
        }
    }

    pub fn get(&self, id: u32) -> Option<&PromptVariant> {
        self.variants.iter().find(|v| v.id == id)
    }

    /// The fittest variant: highest fitness; among equals (or none with
    /// a fitness) the newest.
    pub fn best(&self) -> &PromptVariant {
        self.variants
            .iter()
            .max_by(|a, b| {
                let f = |v: &PromptVariant| v.fitness.unwrap_or(f64::NEG_INFINITY);
                f(a).total_cmp(&f(b)).then(a.id.cmp(&b.id))
            })
            .expect("an archive holds its starting variant")
    }

    /// The variant of the next proposal, counted as used: the newest one
    /// tried fewer than [`TRIALS`] times first, else with probability
    /// [`EXPLORE`] a uniformly random one, else the fittest.
    pub fn sample(&mut self) -> u32 {
        let id = if let Some(fresh) = self.variants.iter().rev().find(|v| v.uses < TRIALS) {
            fresh.id
        } else {
            let draw = (splitmix(&mut self.rng) >> 11) as f64 / (1u64 << 53) as f64;
            if draw < EXPLORE {
                let i = splitmix(&mut self.rng) % self.variants.len() as u64;
                self.variants[i as usize].id
            } else {
                self.best().id
            }
        };
        if let Some(v) = self.variants.iter_mut().find(|v| v.id == id) {
            v.uses += 1;
        }
        id
    }

    /// A candidate produced with variant `id` (score when correct).
    pub fn credit(&mut self, id: u32, candidate: i64, score: Option<f64>) {
        let Some(v) = self.variants.iter_mut().find(|v| v.id == id) else {
            return;
        };
        v.candidates.push(candidate);
        if let Some(s) = score.filter(|s| s.is_finite())
            && v.fitness.is_none_or(|f| s > f)
        {
            v.fitness = Some(s);
            v.best_candidate = Some(candidate);
        }
    }

    /// Record a meta-prompter answer: the edits applied to `parent` make a
    /// new variant (returned) unless nothing changed; what was rejected is
    /// kept for the next call either way.
    pub fn add_edited(
        &mut self,
        parent: u32,
        at: u32,
        answer: &str,
    ) -> Result<(Option<u32>, Vec<RejectedEdit>), super::guidance::GuidanceError> {
        self.meta_calls += 1;
        let Some(base) = self.get(parent) else {
            return Ok((None, Vec::new()));
        };
        let base = Guidance::parse(&base.guidance)?;
        let edited = base.apply(answer);
        self.rejected = edited.rejected.clone();
        if edited.guidance == base || edited.applied.is_empty() {
            return Ok((None, edited.rejected));
        }
        let id = self.variants.iter().map(|v| v.id).max().unwrap_or(0) + 1;
        let mut sections: Vec<String> = edited.applied.iter().map(|s| s.to_string()).collect();
        sections.sort();
        sections.dedup();
        self.variants.push(PromptVariant {
            id,
            parent: Some(parent),
            created_at: at,
            guidance: edited.guidance.marked(),
            diagnosis: super::guidance::diagnosis(answer, MAX_DIAGNOSIS_CHARS),
            edited: sections,
            uses: 0,
            candidates: Vec::new(),
            fitness: None,
            best_candidate: None,
        });
        Ok((Some(id), edited.rejected))
    }

    /// A meta-prompter call that brought no answer (it failed): counted,
    /// so a resumed run does not take a later answer for it.
    pub fn add_failed(&mut self) {
        self.meta_calls += 1;
    }
}

/// One recent proposal as the meta-prompter sees it.
#[derive(Debug, Clone, Serialize)]
pub struct MetaAttempt {
    /// The history line (`iter  3: compile OK, correct True, score ...`).
    pub line: String,
    /// The prompt variant it was made with.
    pub variant: Option<u32>,
    /// Its feedback packet when it failed (compile log, mismatch), cut.
    pub feedback: Option<String>,
}

/// What the meta-prompter is shown.
#[derive(Debug, Clone)]
pub struct MetaContext<'a> {
    pub archive: &'a PromptArchive,
    /// The variant to edit.
    pub parent: u32,
    pub recent: &'a [MetaAttempt],
    /// The seed's and the best score so far.
    pub seed_score: f64,
    pub best_score: f64,
}

#[derive(Serialize)]
struct VariantCtx {
    id: u32,
    parent: Option<u32>,
    uses: u32,
    fitness: Option<String>,
    candidates: usize,
}

#[derive(Serialize)]
struct MetaUserCtx<'a> {
    task: TaskCtx<'a>,
    dialect: DialectCtx,
    device: DeviceCtx,
    guidance: String,
    parent: u32,
    variants: Vec<VariantCtx>,
    recent: &'a [MetaAttempt],
    rejected: Vec<String>,
    seed_score: String,
    best_score: String,
}

#[derive(Serialize)]
struct MetaSystemCtx {
    dialect: DialectCtx,
    sections: Vec<&'static str>,
}

/// A failure's feedback as the meta-prompter gets it: the first lines, at
/// most this many characters.
pub const MAX_META_FEEDBACK_CHARS: usize = 800;

impl PromptBuilder<'_> {
    /// The guidance a run starts from: `guidance_<dialect>.j2`, rendered for
    /// this run's device and settings.
    pub fn default_guidance(&self) -> Result<Guidance, PromptError> {
        super::starting_guidance(
            &self.templates,
            &self.system_ctx(String::new()),
            self.dialect,
        )
    }

    /// The meta-prompter's request: `meta_system.j2` and `meta_user.j2`.
    /// Every attempt's line and feedback pass the same held-out checks as
    /// the generator's prompt.
    pub fn meta_request(&self, ctx: &MetaContext<'_>) -> Result<ChatRequest, PromptError> {
        for a in ctx.recent {
            self.guard_text(&a.line, "meta-prompter history")?;
            if let Some(f) = &a.feedback {
                self.guard_text(f, "meta-prompter feedback")?;
            }
        }
        let parent = ctx
            .archive
            .get(ctx.parent)
            .ok_or_else(|| PromptError::Template {
                name: "meta_user.j2".into(),
                message: format!("the archive has no variant {}", ctx.parent),
            })?;
        let system = self.templates.render(
            "meta_system.j2",
            &MetaSystemCtx {
                dialect: super::dialect_ctx(self.dialect),
                sections: super::guidance::SECTIONS.iter().map(|(n, _)| *n).collect(),
            },
        )?;
        let user = self.templates.render(
            "meta_user.j2",
            &MetaUserCtx {
                task: self.task_ctx(),
                dialect: super::dialect_ctx(self.dialect),
                device: self.device_ctx(),
                guidance: parent.guidance.trim_end().to_string(),
                parent: parent.id,
                variants: ctx
                    .archive
                    .variants
                    .iter()
                    .map(|v| VariantCtx {
                        id: v.id,
                        parent: v.parent,
                        uses: v.uses,
                        fitness: v.fitness.map(|f| format!("{f:.4}")),
                        candidates: v.candidates.len(),
                    })
                    .collect(),
                recent: ctx.recent,
                rejected: ctx.archive.rejected.iter().map(|r| r.to_string()).collect(),
                seed_score: format!("{:.4}", ctx.seed_score),
                best_score: format!("{:.4}", ctx.best_score),
            },
        )?;
        Ok(ChatRequest {
            max_tokens: Some(META_MAX_TOKENS),
            ..ChatRequest::new(system, user)
        })
    }

    /// A failed attempt's feedback, cut for the meta-prompter.
    pub fn meta_feedback(
        &self,
        eval: &kevo_eval::Evaluation,
    ) -> Result<Option<String>, PromptError> {
        let f = self.feedback(eval, "meta-prompter feedback")?;
        if !f.failed {
            return Ok(None);
        }
        Ok(Some(crate::error::snippet(
            f.text.trim(),
            MAX_META_FEEDBACK_CHARS,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> Guidance {
        Guidance {
            sections: vec!["p".into(), "- s".into(), "- x".into(), "a".into()],
        }
    }

    fn edit(search: &str, replace: &str) -> String {
        format!("Diagnosis.\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n")
    }

    /// Two variants; the edited one produced the better kernel. After each
    /// has had its trials, the better one gets most proposals and the
    /// other still gets some.
    #[test]
    fn a_variant_that_produced_a_better_kernel_is_sampled_more() {
        let mut a = PromptArchive::new(&start(), 7);
        let (new, rejected) = a.add_edited(0, 5, &edit("- s", "- s\n- t")).unwrap();
        assert_eq!((new, rejected.len()), (Some(1), 0));
        assert_eq!(a.variants[1].diagnosis, "Diagnosis.");
        assert_eq!(a.variants[1].edited, ["strategies"]);
        let mut counts = [0u32; 2];
        let mut candidate = 0;
        for _ in 0..200 {
            let v = a.sample();
            counts[v as usize] += 1;
            candidate += 1;
            // Variant 1's kernels score 0.5, variant 0's 0.3.
            a.credit(v, candidate, Some(if v == 1 { 0.5 } else { 0.3 }));
        }
        assert!(counts[1] > 3 * counts[0], "{counts:?}");
        assert!(
            counts[0] >= TRIALS + 5,
            "exploration keeps the other: {counts:?}"
        );
        assert_eq!(a.best().id, 1);
        assert_eq!(a.get(1).unwrap().fitness, Some(0.5));
    }

    #[test]
    fn new_variants_are_tried_first_and_no_change_makes_none() {
        let mut a = PromptArchive::new(&start(), 1);
        assert_eq!(a.sample(), 0);
        assert_eq!(a.sample(), 0);
        let (none, rejected) = a.add_edited(0, 3, &edit("nothing here", "x")).unwrap();
        assert_eq!(none, None);
        assert_eq!(rejected.len(), 1);
        assert_eq!(a.rejected.len(), 1, "kept for the next call");
        assert_eq!(a.meta_calls, 1);
        let (v, _) = a.add_edited(0, 4, &edit("p", "q")).unwrap();
        assert_eq!(v, Some(1));
        assert!(a.rejected.is_empty());
        assert_eq!(a.sample(), 1, "the new variant is tried first");
    }

    #[test]
    fn the_archive_is_data_and_a_restored_one_samples_the_same() {
        let mut a = PromptArchive::new(&start(), 3);
        a.add_edited(0, 2, &edit("a", "b")).unwrap();
        for c in 0..9 {
            let v = a.sample();
            a.credit(v, c, Some(c as f64 / 10.0));
        }
        let mut b: PromptArchive =
            serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(a, b);
        let sa: Vec<u32> = (0..20).map(|_| a.sample()).collect();
        let sb: Vec<u32> = (0..20).map(|_| b.sample()).collect();
        assert_eq!(sa, sb);
    }
}

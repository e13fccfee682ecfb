//! Prompt construction: a system prompt per dialect and a user prompt with
//! the task brief, the previous candidate and the incumbent with their
//! feedback packets, the last 8 history records and, when the search is
//! stuck, Metal-Sci's stagnation notice.
//!
//! Held-out sizes never reach a prompt. The builder knows the task's size
//! plan: an evaluation holding a result for any size outside the
//! in-distribution list is refused ([`PromptError::HeldOut`] or
//! [`PromptError::UnknownSize`]) before anything is rendered, and the
//! generated feedback and history text is scanned for the held-out label
//! as a second line of defence.

pub mod analyst;
mod device;
pub mod feedback;
pub mod guidance;
pub mod history;
pub mod meta;
pub mod search;
pub mod templates;
mod user;

use kevo_backend::{DeviceInfo, DeviceKind, Dialect};
use kevo_eval::{Evaluation, Outcome};
use kevo_roofline::Ceilings;
use kevo_tasks::{CeilingKind, SizePlan, SizeSet, Task};
use serde::{Deserialize, Serialize};

pub use analyst::{AnalystContext, recommendation};
pub use feedback::{Feedback, fmt_rate, sci, trim_compile_log};
pub use history::{
    HistoryEntry, StagnationParams, StepOutcome, attempt_note, evaluated_entry, history_line,
    is_stagnating, step_outcome,
};
pub use search::{HeldKernel, SearchBrief};
pub use templates::Templates;

use crate::parse::ExtractOptions;
use crate::types::ChatRequest;
use device::DeviceCtx;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error("task `{task}` has no {dialect} {what}")]
    MissingAsset {
        task: String,
        dialect: Dialect,
        what: &'static str,
    },
    #[error(
        "held-out size `{label}` reached the prompt builder ({context}); held-out results never go into a prompt"
    )]
    HeldOut { label: String, context: String },
    #[error(
        "validation size `{label}` reached the prompt builder ({context}); validation results never go into a prompt"
    )]
    Validation { label: String, context: String },
    #[error("size `{label}` ({context}) is not an in-distribution size of this task ({known})")]
    UnknownSize {
        label: String,
        context: String,
        known: String,
    },
    #[error("template {name}: {message}")]
    Template { name: String, message: String },
    #[error("template directory {dir}: {message}")]
    TemplateDir { dir: String, message: String },
}

/// What the proposer is told about the device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceBrief {
    pub name: String,
    pub ceilings: Ceilings,
    /// Runtime limits (compute units, shared memory, block size) when known.
    pub info: Option<DeviceInfo>,
}

/// How the proposer is asked to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditMode {
    /// One fenced block with the complete source.
    #[default]
    FullSource,
    /// SEARCH/REPLACE blocks against the incumbent (a full rewrite is still
    /// accepted).
    SearchReplace,
}

/// A candidate with its evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    pub source: &'a str,
    pub evaluation: &'a Evaluation,
}

/// Everything that changes from one prompt to the next.
#[derive(Debug, Clone, Copy)]
pub struct UserContext<'a> {
    /// The last candidate that was extracted and evaluated; `None` before
    /// the first one (the prompt then shows the incumbent as the baseline).
    pub previous: Option<Attempt<'a>>,
    pub incumbent: Attempt<'a>,
    /// The incumbent is still the seed (words the baseline as such).
    pub incumbent_is_seed: bool,
    /// The incumbent is the best candidate so far; false when a search
    /// strategy chose another parent (a MAP-Elites cell's elite, an
    /// island member), which the prompt then calls the parent.
    pub incumbent_is_best: bool,
    /// The score the search holds for the incumbent, when re-measurement
    /// replaced its first evaluation's (noise-aware promotion keeps the
    /// median of the interleaved rounds); the prompt then says so, so that
    /// the score to beat matches the history's.
    pub incumbent_score: Option<f64>,
    /// The whole history; the prompt shows its last records.
    pub history: &'a [HistoryEntry],
    /// Other elites of the search (MAP-Elites cells, island members), best
    /// first; dropped from the end when the prompt would pass its budget.
    pub elites: &'a [Attempt<'a>],
    /// Kernels from other cells or islands, for diversity; dropped before
    /// the elites.
    pub inspirations: &'a [Attempt<'a>],
    /// Directions the search suggests, one sentence each.
    pub hints: &'a [String],
    /// The incumbent's profile summary (Nsight Compute, `--profile`), shown
    /// with its result.
    pub incumbent_profile: Option<&'a str>,
    /// The previous attempt's profile summary (`--profile-every`), shown
    /// with its result.
    pub previous_profile: Option<&'a str>,
    /// The performance analyst's recommendation about the incumbent
    /// (`--analyst`), shown before the instructions; one that names the
    /// held-out size is left out.
    pub analysis: Option<&'a str>,
    /// The previous attempt was correct at the shown sizes but the
    /// validation gate (`--validate`) rejected it: the prompt says it
    /// fails on unseen sizes, never which or how.
    pub previous_rejected: bool,
    /// How the search keeps kernels, for strategies that keep more than
    /// one (MAP-Elites, islands); None for (1+1).
    pub search: Option<&'a SearchBrief>,
}

/// What the proposer is told about a candidate the validation gate
/// rejected, and all it is told.
pub const FAILS_UNSEEN: &str = "this kernel is correct at the sizes shown but fails on unseen sizes \
(a wrong result, a failure, or far slower than the seed there); make it correct and fast for \
every size the task allows, not only these";

/// A kernel for the same task from another dialect or device (KForge's
/// cross-platform reference: the CUDA winner while evolving OpenCL, say),
/// shown in every prompt as a working implementation to learn from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReferenceKernel {
    pub dialect: Dialect,
    /// Where it came from: a file or a run, for the reader.
    pub origin: String,
    pub source: String,
}

/// Builds the prompts of one run: one task, one dialect, one size set, one
/// device.
pub struct PromptBuilder<'t> {
    task: &'t Task,
    dialect: Dialect,
    plan: SizePlan,
    device: DeviceBrief,
    templates: Templates,
    edit_mode: EditMode,
    stagnation: StagnationParams,
    history_len: usize,
    fast_math: bool,
    context_budget_tokens: usize,
    tune_best_of: u32,
    reference: Option<ReferenceKernel>,
}

/// Roughly four characters per token for code and English: the prompt
/// budget is counted in characters / 4.
const CHARS_PER_TOKEN: usize = 4;

#[derive(Serialize)]
struct DialectCtx {
    name: String,
    tag: &'static str,
    shared: &'static str,
    barrier: &'static str,
    group: &'static str,
    simd: &'static str,
    simd_ops: &'static str,
}

fn dialect_ctx(d: Dialect) -> DialectCtx {
    let (shared, barrier, group, simd, simd_ops) = match d {
        Dialect::Cuda => (
            "shared memory",
            "`__syncthreads()`",
            "block",
            "warp",
            "`__shfl_xor_sync`, `__shfl_down_sync`",
        ),
        Dialect::OpenCl => (
            "`__local` memory",
            "`barrier(CLK_LOCAL_MEM_FENCE)`",
            "work-group",
            "sub-group or work-group",
            "`sub_group_reduce_add` where the device has sub-groups, else a `__local` tree reduction",
        ),
        Dialect::Metal => (
            "threadgroup memory",
            "`threadgroup_barrier(mem_flags::mem_threadgroup)`",
            "threadgroup",
            "SIMD-group",
            "`simd_sum`, `simd_shuffle_down`",
        ),
        Dialect::Triton => (
            "shared memory (Triton's own)",
            "none (a program is one block; Triton places its barriers)",
            "program",
            "block",
            "`tl.sum`, `tl.reduce`",
        ),
    };
    DialectCtx {
        name: d.to_string(),
        tag: d.fence_tag(),
        shared,
        barrier,
        group,
        simd,
        simd_ops,
    }
}

#[derive(Serialize)]
struct SystemCtx {
    dialect: DialectCtx,
    edit_mode: &'static str,
    fast_math: bool,
    /// "cpu", "integrated_gpu", "discrete_gpu", or "" when unknown.
    device_kind: &'static str,
    /// Configurations kevo evaluates of a kernel that declares tunable
    /// parameters; 0: tuning is off and the prompt does not offer it.
    tune_best_of: u32,
    /// The guidance sections as shown ([`guidance::Guidance::rendered`]).
    guidance: String,
}

/// The guidance of `guidance_<dialect>.j2` rendered with `ctx` and parsed.
fn starting_guidance(
    templates: &Templates,
    ctx: &SystemCtx,
    dialect: Dialect,
) -> Result<guidance::Guidance, PromptError> {
    let name = match dialect {
        Dialect::Cuda => "guidance_cuda.j2",
        Dialect::OpenCl => "guidance_opencl.j2",
        Dialect::Metal => "guidance_metal.j2",
        Dialect::Triton => "guidance_triton.j2",
    };
    let text = templates.render(name, ctx)?;
    guidance::Guidance::parse(&text).map_err(|e| PromptError::Template {
        name: name.to_string(),
        message: e.to_string(),
    })
}

fn kind_name(kind: Option<DeviceKind>) -> &'static str {
    match kind {
        Some(DeviceKind::Cpu) => "cpu",
        Some(DeviceKind::IntegratedGpu) => "integrated_gpu",
        Some(DeviceKind::DiscreteGpu) => "discrete_gpu",
        None => "",
    }
}

#[derive(Serialize)]
struct TaskCtx<'a> {
    name: &'a str,
    regime: &'a str,
    description: &'a str,
    signature: &'a str,
    kernel_names: &'a [String],
    sizes: Vec<&'a str>,
    ceiling: &'static str,
    unit: &'static str,
    work_note: &'a str,
}

fn mode_name(mode: EditMode) -> &'static str {
    match mode {
        EditMode::FullSource => "full",
        EditMode::SearchReplace => "diff",
    }
}

/// `name` as a whole token in `text` (so `4M` is not found in `64M`).
fn contains_token(text: &str, name: &str) -> bool {
    let is_tok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    text.match_indices(name).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(is_tok)
            && !text[i + name.len()..].chars().next().is_some_and(is_tok)
    })
}

impl<'t> PromptBuilder<'t> {
    /// A builder for `task` in `dialect`, scored on `sizes`' in-distribution
    /// sizes. Fails when the task has no signature or seed in the dialect.
    pub fn new(
        task: &'t Task,
        dialect: Dialect,
        sizes: SizeSet,
        device: DeviceBrief,
    ) -> Result<Self, PromptError> {
        for (what, present) in [
            ("signature", task.signature(dialect).is_some()),
            ("seed kernel", task.seed(dialect).is_some()),
        ] {
            if !present {
                return Err(PromptError::MissingAsset {
                    task: task.name().to_string(),
                    dialect,
                    what,
                });
            }
        }
        Ok(PromptBuilder {
            task,
            dialect,
            plan: task.sizes(sizes),
            device,
            templates: Templates::builtin(),
            edit_mode: EditMode::FullSource,
            stagnation: StagnationParams::default(),
            history_len: 8,
            fast_math: true,
            context_budget_tokens: 16_000,
            tune_best_of: 0,
            reference: None,
        })
    }

    pub fn with_templates(mut self, templates: Templates) -> Self {
        self.templates = templates;
        self
    }

    /// Offer tunable parameters in the system prompt: kevo evaluates up to
    /// `best_of` configurations of a kernel that declares them (0: off).
    /// Show `reference` (a kernel from another dialect or device) in
    /// every prompt.
    pub fn with_reference(mut self, reference: Option<ReferenceKernel>) -> Self {
        self.reference = reference;
        self
    }

    pub fn with_tuning(mut self, best_of: u32) -> Self {
        self.tune_best_of = best_of;
        self
    }

    pub fn with_edit_mode(mut self, mode: EditMode) -> Self {
        self.edit_mode = mode;
        self
    }

    pub fn with_stagnation(mut self, params: StagnationParams) -> Self {
        self.stagnation = params;
        self
    }

    /// How many history records the prompt shows (8, as Metal-Sci).
    pub fn with_history_len(mut self, n: usize) -> Self {
        self.history_len = n;
        self
    }

    /// Whether candidates are compiled with fast math (the system prompt
    /// says so); match `CompileOptions::fast_math`.
    pub fn with_fast_math(mut self, on: bool) -> Self {
        self.fast_math = on;
        self
    }

    /// The user prompt's size limit in tokens (estimated as characters /
    /// 4): elites and inspirations beyond it are left out, inspirations
    /// first (16 000 by default).
    pub fn with_context_budget(mut self, tokens: usize) -> Self {
        self.context_budget_tokens = tokens;
        self
    }

    pub fn edit_mode(&self) -> EditMode {
        self.edit_mode
    }

    /// What [`crate::parse::extract`] needs for this run's responses; edits
    /// apply to `parent` (the incumbent's source).
    pub fn extract_options<'a>(&'a self, parent: Option<&'a str>) -> ExtractOptions<'a> {
        ExtractOptions {
            dialect: self.dialect,
            kernel_names: self.task.kernel_names(),
            parent,
        }
    }

    fn mode_name(&self) -> &'static str {
        mode_name(self.edit_mode)
    }

    /// The system prompt of this run's dialect and edit mode.
    pub fn system(&self) -> Result<String, PromptError> {
        Self::system_prompt(
            &self.templates,
            self.dialect,
            self.edit_mode,
            self.fast_math,
            self.device_kind(),
            self.tune_best_of,
        )
    }

    fn system_ctx(&self, guidance: String) -> SystemCtx {
        SystemCtx {
            dialect: dialect_ctx(self.dialect),
            edit_mode: mode_name(self.edit_mode),
            fast_math: self.fast_math,
            device_kind: kind_name(self.device_kind()),
            tune_best_of: self.tune_best_of,
            guidance,
        }
    }

    /// The system prompt with `guidance` (a prompt variant) in place of
    /// the starting guidance.
    pub fn system_with(&self, guidance: &guidance::Guidance) -> Result<String, PromptError> {
        let name = match self.dialect {
            Dialect::Cuda => "system_cuda.j2",
            Dialect::OpenCl => "system_opencl.j2",
            Dialect::Metal => "system_metal.j2",
            Dialect::Triton => "system_triton.j2",
        };
        self.templates
            .render(name, &self.system_ctx(guidance.rendered()))
    }

    fn device_kind(&self) -> Option<DeviceKind> {
        self.device.info.as_ref().map(DeviceInfo::kind)
    }

    /// A system prompt without a task: it depends only on the dialect, the
    /// edit mode, the fast-math setting and the kind of device (a CPU gets
    /// advice of its own), so it stays the same for a whole run (and is
    /// cacheable by providers that cache prefixes).
    pub fn system_prompt(
        templates: &Templates,
        dialect: Dialect,
        mode: EditMode,
        fast_math: bool,
        kind: Option<DeviceKind>,
        tune_best_of: u32,
    ) -> Result<String, PromptError> {
        let name = match dialect {
            Dialect::Cuda => "system_cuda.j2",
            Dialect::OpenCl => "system_opencl.j2",
            Dialect::Metal => "system_metal.j2",
            Dialect::Triton => "system_triton.j2",
        };
        let mut ctx = SystemCtx {
            dialect: dialect_ctx(dialect),
            edit_mode: mode_name(mode),
            fast_math,
            device_kind: kind_name(kind),
            tune_best_of,
            guidance: String::new(),
        };
        ctx.guidance = starting_guidance(templates, &ctx, dialect)?.rendered();
        templates.render(name, &ctx)
    }

    /// Refuse an evaluation that mentions any size outside the in-distribution list.
    fn check_sizes(&self, eval: &Evaluation, context: &str) -> Result<(), PromptError> {
        let outcome_size = match &eval.outcome {
            Outcome::WrongResult { size, .. } => Some(size),
            Outcome::RuntimeError { size, .. } | Outcome::Timeout { size, .. } => size.as_ref(),
            _ => None,
        };
        for label in eval.sizes.iter().map(|s| &s.label).chain(outcome_size) {
            self.refuse_hidden(label, label, context)?;
            if !self.plan.in_distribution.iter().any(|s| s.label == *label) {
                return Err(PromptError::UnknownSize {
                    label: label.clone(),
                    context: context.to_string(),
                    known: self
                        .plan
                        .in_distribution
                        .iter()
                        .map(|s| s.label.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(())
    }

    /// An error when `text` (a label, or any text when searched for
    /// tokens by the caller) is a hidden size's `label`.
    fn refuse_hidden(&self, text: &str, label: &str, context: &str) -> Result<(), PromptError> {
        if text != label {
            return Ok(());
        }
        let (label, context) = (label.to_string(), context.to_string());
        Err(if label == self.plan.held_out.label {
            PromptError::HeldOut { label, context }
        } else if self.plan.validation.iter().any(|s| s.label == label) {
            PromptError::Validation { label, context }
        } else {
            return Ok(());
        })
    }

    /// Refuse text that names a held-out or validation size.
    fn guard_text(&self, text: &str, context: &str) -> Result<(), PromptError> {
        match self.plan.hidden_labels().find(|l| contains_token(text, l)) {
            Some(label) => self.refuse_hidden(label, label, context),
            None => Ok(()),
        }
    }

    /// Whether `text` names a size the proposer never sees.
    fn names_hidden(&self, text: &str) -> bool {
        self.plan.hidden_labels().any(|l| contains_token(text, l))
    }

    /// The feedback packet of one attempt, after the held-out checks.
    pub fn feedback(&self, eval: &Evaluation, context: &str) -> Result<Feedback, PromptError> {
        self.check_sizes(eval, context)?;
        let f = feedback::render_for(eval, self.device_kind());
        self.guard_text(&f.text, context)?;
        Ok(f)
    }

    fn task_ctx(&self) -> TaskCtx<'_> {
        let kind = self.task.ceiling();
        TaskCtx {
            name: self.task.name(),
            regime: self.task.regime(),
            description: self.task.description().trim(),
            signature: self.task.signature(self.dialect).unwrap_or("").trim(),
            kernel_names: self.task.kernel_names(),
            sizes: self
                .plan
                .in_distribution
                .iter()
                .map(|s| s.label.as_str())
                .collect(),
            ceiling: match kind {
                CeilingKind::Bandwidth => "DRAM bandwidth",
                CeilingKind::Fp32 => "FP32",
            },
            unit: kind.unit(),
            work_note: self.task.work_note(),
        }
    }

    fn device_ctx(&self) -> DeviceCtx {
        device::device_ctx(&self.device, self.dialect, self.task.ceiling())
    }

    /// System and user prompt as one request.
    pub fn request(&self, ctx: &UserContext<'_>) -> Result<ChatRequest, PromptError> {
        Ok(ChatRequest::new(self.system()?, self.user(ctx)?))
    }

    /// [`Self::request`] with a prompt variant's guidance, when given.
    pub fn request_with(
        &self,
        ctx: &UserContext<'_>,
        guidance: Option<&guidance::Guidance>,
    ) -> Result<ChatRequest, PromptError> {
        let system = match guidance {
            Some(g) => self.system_with(g)?,
            None => self.system()?,
        };
        Ok(ChatRequest::new(system, self.user(ctx)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_whole() {
        assert!(contains_token("sizes 1M, 4M", "4M"));
        assert!(!contains_token("sizes 64M, 16M", "4M"));
        assert!(!contains_token("4M5", "4M"));
        assert!(contains_token("(768x768_75)", "768x768_75"));
    }

    #[test]
    fn rates_are_rounded_by_size() {
        assert_eq!(fmt_rate(3350.0), "3350");
        assert_eq!(fmt_rate(20.34), "20.3");
        assert_eq!(fmt_rate(2.345), "2.35");
    }
}

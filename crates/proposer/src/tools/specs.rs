//! The tools as offered to a model: names, descriptions and the JSON
//! Schemas of their arguments, the same for OpenAI and Anthropic.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ToolBudget, ToolHost};
use crate::types::ToolSpec;

/// A tool a proposal may be offered; `submit` is always offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolName {
    Compile,
    Check,
    Time,
    Profile,
    Show,
}

impl ToolName {
    pub fn all() -> Vec<ToolName> {
        vec![
            ToolName::Compile,
            ToolName::Check,
            ToolName::Time,
            ToolName::Profile,
            ToolName::Show,
        ]
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Compile => "compile",
            ToolName::Check => "check",
            ToolName::Time => "time",
            ToolName::Profile => "profile",
            ToolName::Show => "show",
        }
    }
}

/// The name of the tool that ends a proposal.
pub const SUBMIT: &str = "submit";

fn source_only(what: &str) -> Value {
    json!({
        "type": "object",
        "properties": {"source": {"type": "string", "description": what}},
        "required": ["source"],
        "additionalProperties": false,
    })
}

/// The tools offered under `budget` on `host`: those it names that the
/// host can run (`profile` only with a profiler, `show` always), then
/// `submit`. Size arguments list the host's sizes as an enum.
pub fn specs(budget: &ToolBudget, host: &dyn ToolHost) -> Vec<ToolSpec> {
    let sizes = host.sizes();
    let mut out: Vec<ToolSpec> = budget
        .tools
        .iter()
        .filter(|t| **t != ToolName::Profile || host.can_profile())
        .map(|t| spec(*t, &sizes, host.elites()))
        .collect();
    out.push(ToolSpec {
        name: SUBMIT.into(),
        description: "Submit the complete kernel source as your answer. This ends the \
                      proposal; kevo then evaluates it at every size of the run."
            .into(),
        parameters: source_only("The complete kernel source file."),
    });
    out
}

fn spec(tool: ToolName, sizes: &[String], elites: usize) -> ToolSpec {
    let (description, parameters) = match tool {
        ToolName::Compile => (
            "Compile a kernel source. Returns the compiler's diagnostics, or the \
             compiled kernels' registers, spills, shared memory and occupancy."
                .to_string(),
            source_only("The complete kernel source file."),
        ),
        ToolName::Check => (
            "Compile and run a kernel at the small check sizes and compare it with the \
             reference. Returns pass, or the first failing size with its error and \
             tolerance."
                .to_string(),
            source_only("The complete kernel source file."),
        ),
        ToolName::Time => (
            format!(
                "Check and time a kernel at the named sizes (all of {sizes:?} when none \
                 are named), beside the incumbent measured in the same call. Returns \
                 median times with their spread, and the ratio to the incumbent."
            ),
            json!({
                "type": "object",
                "properties": {
                    "source": {"type": "string", "description": "The complete kernel source file."},
                    "sizes": {"type": "array", "items": {"type": "string", "enum": sizes}},
                },
                "required": ["source"],
                "additionalProperties": false,
            }),
        ),
        ToolName::Profile => (
            "Profile a kernel at one size: the profiler's summary of where its time goes."
                .to_string(),
            json!({
                "type": "object",
                "properties": {
                    "source": {"type": "string", "description": "The complete kernel source file."},
                    "size": {"type": "string", "enum": sizes},
                },
                "required": ["source", "size"],
                "additionalProperties": false,
            }),
        ),
        ToolName::Show => (
            format!(
                "Show a stored kernel's source and its evaluation: the parent you are \
                 improving, the incumbent (best so far), or elite N (0 to {}).",
                elites.saturating_sub(1)
            ),
            json!({
                "type": "object",
                "properties": {
                    "which": {"type": "string", "enum": ["parent", "incumbent", "elite"]},
                    "index": {"type": "integer", "minimum": 0},
                },
                "required": ["which"],
                "additionalProperties": false,
            }),
        ),
    };
    ToolSpec {
        name: tool.as_str().into(),
        description,
        parameters,
    }
}

//! What goes into a provider and what comes out.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One prompt: a system part and a user part, plus optional per-request
/// overrides of the provider's configured limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub system: String,
    pub user: String,
    /// Output-token limit for this request (reasoning included); the
    /// provider's configured limit when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Tools the model may call (OpenAI `tools`, Anthropic `tools`);
    /// empty for a one-shot request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// The conversation so far after the user part: each of the model's
    /// earlier turns and what its tool calls returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Turn>,
}

/// A tool offered to the model: a name, what it does, and the JSON
/// Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// One call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The API's id for the call, echoed with its result.
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them: a JSON text, unparsed, so
    /// that a malformed one reaches the tool loop and is answered there.
    pub arguments: String,
}

/// Give every call of a turn an id its result can be matched by: where a
/// server sent an empty or repeated id, every call gets `call_1`,
/// `call_2`, ... in order. Returns whether it did, so that the provider
/// patches the ids in the message it sends back the same way.
pub(crate) fn renumber_ambiguous_ids(calls: &mut [ToolCall]) -> bool {
    let mut seen = std::collections::HashSet::new();
    let ambiguous = calls
        .iter()
        .any(|c| c.id.trim().is_empty() || !seen.insert(c.id.as_str()));
    if ambiguous {
        for (i, c) in calls.iter_mut().enumerate() {
            c.id = format!("call_{}", i + 1);
        }
    }
    ambiguous
}

/// What one tool call returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub content: String,
    /// The call was refused or failed (Anthropic's `is_error`).
    #[serde(default)]
    pub is_error: bool,
}

/// One earlier turn of a tool conversation: the model's message in its
/// API's own shape (sent back verbatim: Anthropic requires its thinking
/// blocks, signatures included, to come back unchanged) and the results
/// of the calls it made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub native: serde_json::Value,
    pub results: Vec<ToolResult>,
}

impl ChatRequest {
    pub fn new(system: impl Into<String>, user: impl Into<String>) -> Self {
        ChatRequest {
            system: system.into(),
            user: user.into(),
            ..Default::default()
        }
    }

    /// The replay key: lowercase hex SHA-256 of the system text, one NUL
    /// byte and the user text. The NUL keeps ("ab", "c") and ("a", "bc")
    /// apart; the model is left out so a recording replays under any spec.
    /// A tool conversation's turns and tools follow after another NUL, so
    /// each turn has its own key and a one-shot request keeps its old one.
    pub fn prompt_key(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.system.as_bytes());
        h.update([0u8]);
        h.update(self.user.as_bytes());
        if !self.tools.is_empty() || !self.turns.is_empty() {
            h.update([0u8]);
            h.update(serde_json::to_string(&(&self.tools, &self.turns)).unwrap_or_default());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Bytes of prompt the request sends: system, user, and every earlier
    /// turn and tool result (what a worst-case cost is estimated from).
    pub fn prompt_bytes(&self) -> usize {
        let turns: usize = self
            .turns
            .iter()
            .map(|t| {
                t.native.to_string().len()
                    + t.results.iter().map(|r| r.content.len()).sum::<usize>()
            })
            .sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.description.len() + t.parameters.to_string().len())
            .sum();
        self.system.len() + self.user.len() + turns + tools
    }
}

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Generated tokens, reasoning/thinking included (that is how both
    /// OpenAI and Anthropic bill them).
    pub output_tokens: u64,
    /// The reasoning share of `output_tokens`, when the API says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// The cached share of `input_tokens`, when the API says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        if let Some(r) = other.reasoning_tokens {
            *self.reasoning_tokens.get_or_insert(0) += r;
        }
        if let Some(c) = other.cached_tokens {
            *self.cached_tokens.get_or_insert(0) += c;
        }
    }
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    /// Reasoning or thinking text, when the API returns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    pub usage: Usage,
    /// From the price table; `None` when the model has no price there.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Wall time of the successful attempt (retries not included).
    #[serde(with = "duration_ms", rename = "latency_ms")]
    pub latency: Duration,
    /// The model the server says answered (may carry a date suffix).
    pub model: String,
    /// "openai", "anthropic", "cmd", "replay" or a configured endpoint name.
    pub provider: String,
    /// The API's own finish reason: "stop", "length", "end_turn",
    /// "max_tokens", ...
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Attempts it took, 1 when the first one succeeded.
    #[serde(default = "one")]
    pub attempts: u32,
    /// Why the token counts are not known (the server sent none, or
    /// figures no call can have): the cost is then unknown, never 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_unknown: Option<String>,
    /// The ensemble member that answered (its label), set by an ensemble:
    /// what a model-choice bandit is rewarded by and the run stores as the
    /// call's provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// The tools the model called in this answer, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The answer as its API's message, for sending back as a [`Turn`]
    /// (only when tools were offered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<serde_json::Value>,
}

fn one() -> u32 {
    1
}

impl Completion {
    /// Cut off by the output-token limit: the code block is probably
    /// incomplete.
    pub fn truncated(&self) -> bool {
        matches!(
            self.finish_reason.as_deref(),
            Some("length" | "max_tokens" | "max_output_tokens")
        )
    }
}

/// Durations as fractional milliseconds in JSON.
pub(crate) mod duration_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Ok(Duration::from_secs_f64((ms / 1e3).max(0.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_key_separates_system_and_user() {
        let a = ChatRequest::new("ab", "c").prompt_key();
        let b = ChatRequest::new("a", "bc").prompt_key();
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        // Limits do not change the key.
        let mut c = ChatRequest::new("ab", "c");
        c.max_tokens = Some(5);
        assert_eq!(c.prompt_key(), a);
        // Known vector: sha256("\0") .
        assert_eq!(
            ChatRequest::new("", "").prompt_key(),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }

    #[test]
    fn completion_round_trips_with_latency_in_ms() {
        let c = Completion {
            text: "t".into(),
            reasoning: None,
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
                reasoning_tokens: Some(1),
                cached_tokens: None,
            },
            cost_usd: Some(0.5),
            latency: Duration::from_millis(1500),
            model: "m".into(),
            provider: "p".into(),
            finish_reason: Some("length".into()),
            attempts: 2,
            usage_unknown: None,
            member: None,
            tool_calls: Vec::new(),
            native: None,
        };
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j["latency_ms"], 1500.0);
        let back: Completion = serde_json::from_value(j).unwrap();
        assert_eq!(back, c);
        assert!(back.truncated());
    }
}

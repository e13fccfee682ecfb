//! What an agent says it spent: `usage.json` in its directory, written by
//! the agent (a wrapper around a CLI assistant that prints its usage, say)
//! before it exits. Without one, an agent's spend is unknown, never 0.

use serde::Deserialize;

use crate::types::Usage;

/// The file an agent may leave.
pub(super) const FILE: &str = "usage.json";

/// What the file holds: the tokens of every model call the agent made
/// for this proposal, and their cost where the agent knows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Reported {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
    #[serde(default)]
    pub model: Option<String>,
}

/// Counts beyond this are not believed: 10^9 tokens is more than any
/// proposal spends (a typo or an overflow is not a spend).
const MAX_TOKENS: u64 = 1_000_000_000;

impl Reported {
    /// `text` read, or why it cannot be taken.
    pub(super) fn parse(text: &str) -> Result<Reported, String> {
        let r: Reported =
            serde_json::from_str(text).map_err(|e| format!("`{FILE}` is not usage: {e}"))?;
        let tokens = [
            Some(r.input_tokens),
            Some(r.output_tokens),
            r.reasoning_tokens,
        ];
        if tokens.iter().flatten().any(|&t| t > MAX_TOKENS) {
            return Err(format!("`{FILE}` claims more than {MAX_TOKENS} tokens"));
        }
        if r.cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
            return Err(format!("`{FILE}` has a cost that is not a finite amount"));
        }
        if let Some(m) = &r.model
            && (m.len() > 200 || m.chars().any(char::is_control))
        {
            return Err(format!(
                "`{FILE}` names its model in more than a short line"
            ));
        }
        Ok(r)
    }

    pub(super) fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            reasoning_tokens: self.reasoning_tokens,
            cached_tokens: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_cost_are_read() {
        let r = Reported::parse(
            r#"{"input_tokens": 1200, "output_tokens": 340, "cost_usd": 0.012, "model": "m-1"}"#,
        )
        .unwrap();
        assert_eq!(r.usage().input_tokens, 1200);
        assert_eq!(r.usage().output_tokens, 340);
        assert_eq!(r.cost_usd, Some(0.012));
    }

    #[test]
    fn what_is_not_a_spend_is_refused_with_the_reason() {
        for (text, why) in [
            ("{\"input_tokens\": 1}", "not usage"),
            ("{\"input_tokens\": -1, \"output_tokens\": 2}", "not usage"),
            (
                "{\"input_tokens\": 1, \"output_tokens\": 2, \"extra\": 1}",
                "not usage",
            ),
            (
                "{\"input_tokens\": 2000000000, \"output_tokens\": 2}",
                "more than",
            ),
            (
                "{\"input_tokens\": 1, \"output_tokens\": 2, \"cost_usd\": -3}",
                "finite",
            ),
            (
                "{\"input_tokens\": 1, \"output_tokens\": 2, \"model\": \"a\\nb\"}",
                "short line",
            ),
        ] {
            let err = Reported::parse(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}

//! Cost in USD from a price table. Prices are per million tokens; the
//! built-in rows are vendors' published list prices (2025) and every row can
//! be overridden or extended from the config file's `[prices]` table, since
//! prices change more often than kevo does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Price of cached prompt tokens; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
}

impl Price {
    const fn new(input: f64, output: f64, cached: f64) -> Self {
        Price {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: Some(cached),
        }
    }

    /// Cost of one call. Output includes reasoning tokens: both OpenAI and
    /// Anthropic bill them as output.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_tokens.unwrap_or(0).min(usage.input_tokens);
        let uncached = usage.input_tokens - cached;
        (uncached as f64 * self.input_per_mtok
            + cached as f64 * self.cached_input_per_mtok.unwrap_or(self.input_per_mtok)
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1e6
    }
}

/// Model name -> price. Lookup tries the exact name, then the name without
/// a `vendor/` prefix (OpenRouter style), then the longest table key that is
/// a prefix ending at a `-`, `:` or `@` boundary, so `gpt-5-2025-08-07`
/// finds `gpt-5` while `gpt-5-mini` keeps its own row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable(pub BTreeMap<String, Price>);

const BUILTIN: &[(&str, Price)] = &[
    ("gpt-5", Price::new(1.25, 10.0, 0.125)),
    ("gpt-5-mini", Price::new(0.25, 2.0, 0.025)),
    ("gpt-5-nano", Price::new(0.05, 0.40, 0.005)),
    ("gpt-4.1", Price::new(2.0, 8.0, 0.50)),
    ("gpt-4.1-mini", Price::new(0.40, 1.60, 0.10)),
    ("gpt-4o", Price::new(2.50, 10.0, 1.25)),
    ("o3", Price::new(2.0, 8.0, 0.50)),
    ("o3-mini", Price::new(1.10, 4.40, 0.55)),
    ("o4-mini", Price::new(1.10, 4.40, 0.275)),
    ("claude-opus-4", Price::new(15.0, 75.0, 1.50)),
    ("claude-opus-4-1", Price::new(15.0, 75.0, 1.50)),
    ("claude-sonnet-4", Price::new(3.0, 15.0, 0.30)),
    ("claude-sonnet-4-5", Price::new(3.0, 15.0, 0.30)),
    ("claude-haiku-4-5", Price::new(1.0, 5.0, 0.10)),
    ("deepseek-chat", Price::new(0.28, 0.42, 0.028)),
    ("deepseek-reasoner", Price::new(0.28, 0.42, 0.028)),
];

impl PriceTable {
    /// The built-in list prices.
    pub fn builtin() -> Self {
        PriceTable(BUILTIN.iter().map(|(k, p)| (k.to_string(), *p)).collect())
    }

    /// This table with `overrides` replacing or adding rows.
    pub fn with(mut self, overrides: &BTreeMap<String, Price>) -> Self {
        self.0
            .extend(overrides.iter().map(|(k, v)| (k.clone(), *v)));
        self
    }

    /// The row for `model` and the key it was found under.
    pub fn lookup(&self, model: &str) -> Option<(&str, &Price)> {
        if let Some((k, p)) = self.0.get_key_value(model) {
            return Some((k, p));
        }
        let bare = model.rsplit_once('/').map_or(model, |(_, m)| m);
        if let Some((k, p)) = self.0.get_key_value(bare) {
            return Some((k, p));
        }
        self.0
            .iter()
            .filter(|(k, _)| {
                bare.strip_prefix(k.as_str())
                    .is_some_and(|rest| rest.starts_with(['-', ':', '@']))
            })
            .max_by_key(|(k, _)| k.len())
            .map(|(k, p)| (k.as_str(), p))
    }

    /// Cost of one call, `None` when no row matches either name.
    pub fn cost(&self, models: &[&str], usage: &Usage) -> Option<f64> {
        models
            .iter()
            .find_map(|m| self.lookup(m))
            .map(|(_, p)| p.cost(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_prefers_exact_then_longest_prefix() {
        let t = PriceTable::builtin();
        assert_eq!(t.lookup("gpt-5").unwrap().0, "gpt-5");
        assert_eq!(t.lookup("gpt-5-2025-08-07").unwrap().0, "gpt-5");
        assert_eq!(t.lookup("gpt-5-mini-2025-08-07").unwrap().0, "gpt-5-mini");
        assert_eq!(t.lookup("openai/gpt-5-mini").unwrap().0, "gpt-5-mini");
        assert_eq!(
            t.lookup("claude-opus-4-1-20250805").unwrap().0,
            "claude-opus-4-1"
        );
        // `o3` must not price `o3x` or `o30`.
        assert!(t.lookup("o3x").is_none());
        assert!(t.lookup("qwen2.5-coder").is_none());
    }

    #[test]
    fn cost_counts_cached_input_and_output() {
        let p = Price::new(2.0, 8.0, 0.5);
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            reasoning_tokens: Some(400_000),
            cached_tokens: Some(200_000),
        };
        // 0.8 M * 2 + 0.2 M * 0.5 + 0.5 M * 8 = 1.6 + 0.1 + 4.0
        assert!((p.cost(&u) - 5.7).abs() < 1e-12);
        let no_cache_price = Price {
            cached_input_per_mtok: None,
            ..p
        };
        assert!((no_cache_price.cost(&u) - 6.0).abs() < 1e-12);
    }

    #[test]
    fn overrides_replace_rows() {
        let mut o = BTreeMap::new();
        o.insert("gpt-5".to_string(), Price::new(1.0, 1.0, 1.0));
        o.insert("local".to_string(), Price::new(0.0, 0.0, 0.0));
        let t = PriceTable::builtin().with(&o);
        assert_eq!(t.lookup("gpt-5").unwrap().1.input_per_mtok, 1.0);
        let u = Usage {
            input_tokens: 10,
            output_tokens: 10,
            ..Default::default()
        };
        assert_eq!(t.cost(&["nope", "local"], &u), Some(0.0));
        assert_eq!(t.cost(&["nope"], &u), None);
    }
}

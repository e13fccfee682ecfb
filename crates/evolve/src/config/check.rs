//! Range and consistency checks of a layer's values: the first bad key with its
//! message.

use kevo_strategy::StrategyConfig;

use super::sections::RunConfig;

/// The analyst is one model answering at once: not an ensemble, not a
/// batch (answers within hours), not `external` (nobody to ask).
pub(super) fn check_analyst(spec: &str) -> Result<(), String> {
    check_helper_model(spec, "analyst")
}

/// A model kevo calls itself between proposals (`role`: the analyst, the
/// meta-prompter) is one model that answers at once.
pub(crate) fn check_helper_model(spec: &str, role: &str) -> Result<(), String> {
    let specs = kevo_proposer::parse_specs(spec).map_err(|e| e.to_string())?;
    match specs.as_slice() {
        [one] => match one.kind {
            kevo_proposer::SpecKind::External => Err(format!(
                "`external` cannot be the {role}: the {role} is called by kevo"
            )),
            kevo_proposer::SpecKind::Batch { .. } => Err(format!(
                "a `batch:` model answers within hours; the {role} must answer before the next prompt"
            )),
            kevo_proposer::SpecKind::None => {
                Err(format!("`none` is no model; the {role} must be one"))
            }
            _ => Ok(()),
        },
        _ => Err(format!(
            "names {} models; the {role} is one model",
            specs.len()
        )),
    }
}

/// The strategy's own keys: a table without a name, or keys of another
/// strategy than the one named, say which strategy they belong to.
pub(super) fn check_strategy_table(
    table: &toml::Table,
    require_name: bool,
) -> Result<(), (Option<String>, String)> {
    let Some(strategy) = table.get("strategy").and_then(|s| s.as_table()) else {
        return Ok(());
    };
    let name = match strategy.get("name") {
        Some(toml::Value::String(name)) => name.as_str(),
        Some(_) => {
            return Err((
                Some("strategy.name".into()),
                "must be a string: one-plus-one, map-elites or islands".into(),
            ));
        }
        None if !require_name => "",
        None => {
            let key = strategy.keys().next().map(|k| format!("strategy.{k}"));
            return Err((
                key,
                "the strategy has no name: set `name` in [strategy] (one-plus-one, map-elites or islands) or give --strategy".into(),
            ));
        }
    };
    // Each strategy's keys, from its settings as written (not a list
    // kept by hand beside the structs).
    let keys_of = |config: StrategyConfig| -> Vec<String> {
        toml::Table::try_from(&config)
            .map(|t| t.keys().filter(|k| *k != "name").cloned().collect())
            .unwrap_or_default()
    };
    let map_elites = keys_of(StrategyConfig::MapElites(Default::default()));
    let islands = keys_of(StrategyConfig::Islands(Default::default()));
    let allowed: &[String] = match name {
        // Unnamed here: any strategy's key.
        "" | "one-plus-one" => &[],
        "map-elites" => &map_elites,
        "islands" => &islands,
        other => {
            return Err((
                Some("strategy.name".into()),
                format!("`{other}` is not a strategy (one-plus-one, map-elites, islands)"),
            ));
        }
    };
    for key in strategy.keys().filter(|k| *k != "name") {
        if allowed.contains(key) {
            continue;
        }
        let belongs: Vec<&str> = [("map-elites", &map_elites), ("islands", &islands)]
            .iter()
            .filter(|(_, keys)| keys.contains(key))
            .map(|(n, _)| *n)
            .collect();
        if name.is_empty() && !belongs.is_empty() {
            continue;
        }
        let message = if belongs.is_empty() {
            format!("`{key}` is not a setting of any strategy")
        } else {
            format!(
                "applies to {} only, not to {name}; choose the strategy with `name` or --strategy",
                belongs.join(" or ")
            )
        };
        return Err((Some(format!("strategy.{key}")), message));
    }
    Ok(())
}

pub(super) fn positive(key: &str, v: Option<f64>, what: &str) -> Result<(), (String, String)> {
    match v {
        Some(v) if !(v.is_finite() && v > 0.0) => Err((
            key.into(),
            format!("must be a positive number{what}, not {v}"),
        )),
        _ => Ok(()),
    }
}

pub(super) fn non_negative(key: &str, v: Option<f64>, what: &str) -> Result<(), (String, String)> {
    match v {
        Some(v) if !(v.is_finite() && v >= 0.0) => Err((
            key.into(),
            format!("must be a non-negative number{what}, not {v}"),
        )),
        _ => Ok(()),
    }
}

pub(super) fn at_least_one<T: Into<u64> + Copy>(
    key: &str,
    v: Option<T>,
) -> Result<(), (String, String)> {
    match v {
        Some(v) if v.into() == 0 => Err((key.into(), "must be at least 1".into())),
        _ => Ok(()),
    }
}

impl RunConfig {
    /// Values in range; (key, message) for the first that is not.
    pub(super) fn check(&self) -> Result<(), (String, String)> {
        self.check_device_and_limits()?;
        self.check_llm()?;
        self.check_budget_prompt_and_promotion()?;
        self.check_strategy()
    }

    /// The task, the device's declared ceilings, timing, limits and the
    /// sandbox.
    fn check_device_and_limits(&self) -> Result<(), (String, String)> {
        const SECONDS: &str = " of seconds";
        const GIB: &str = " of GiB";
        if let Some(task) = &self.task {
            kevo_tasks::resolve(task).map_err(|e| ("task".into(), e.to_string()))?;
        }
        if let Some(c) = &self.device.ceilings {
            positive(
                "device.ceilings.bandwidth_gbs",
                Some(c.bandwidth_gbs),
                " of GB/s",
            )?;
            positive(
                "device.ceilings.fp32_gflops",
                Some(c.fp32_gflops),
                " of GFLOPS",
            )?;
        }
        non_negative("timing.target_spread", self.timing.target_spread, "")?;
        if let Some(n) = self.timing.max_timed_runs
            && n < 10
        {
            return Err((
                "timing.max_timed_runs".into(),
                format!("must be at least 10 (medians and quartiles need them), not {n}"),
            ));
        }
        positive(
            "limits.candidate_timeout_s",
            self.limits.candidate_timeout_s,
            SECONDS,
        )?;
        positive(
            "limits.compile_timeout_s",
            self.limits.compile_timeout_s,
            SECONDS,
        )?;
        non_negative(
            "limits.compile_memory_gib",
            self.limits.compile_memory_gib,
            GIB,
        )?;
        non_negative(
            "limits.worker_memory_gib",
            self.limits.worker_memory_gib,
            GIB,
        )?;
        if self.sandbox.required == Some(true) && self.sandbox.enabled == Some(false) {
            return Err((
                "sandbox.required".into(),
                "a sandbox cannot be required and disabled at once".into(),
            ));
        }
        Ok(())
    }

    /// The models and how they are called.
    fn check_llm(&self) -> Result<(), (String, String)> {
        const SECONDS: &str = " of seconds";
        if let Some(models) = &self.llm.models {
            if models.is_empty() {
                return Err(("llm.models".into(), "names no model".into()));
            }
            kevo_proposer::parse_specs(&models.join(","))
                .map_err(|e| ("llm.models".to_string(), e.to_string()))?;
        }
        for tool in self.device.sanitize_winner.iter().flatten() {
            tool.parse::<kevo_worker::sanitizer::SanitizerTool>()
                .map_err(|m| ("device.sanitize_winner".to_string(), m))?;
        }
        if let Some(analyst) = &self.llm.analyst {
            check_analyst(analyst).map_err(|m| ("llm.analyst".to_string(), m))?;
        }
        if let Some(m) = &self.llm.meta_prompter {
            check_helper_model(m, "meta-prompter")
                .map_err(|m| ("llm.meta_prompter".to_string(), m))?;
        }
        at_least_one("llm.meta_every", self.llm.meta_every)?;
        if self.llm.model_choice.is_some_and(|c| c.is_bandit())
            && let Some(models) = &self.llm.models
            && kevo_proposer::parse_specs(&models.join(",")).is_ok_and(|s| s.len() < 2)
        {
            return Err((
                "llm.model_choice".into(),
                "a bandit chooses among several models: name at least two in llm.models (--llm a,b)"
                    .into(),
            ));
        }
        positive("llm.timeout_s", self.llm.timeout_s, SECONDS)?;
        at_least_one("llm.concurrency", self.llm.concurrency)?;
        at_least_one(
            "llm.candidates_per_iteration",
            self.llm.candidates_per_iteration,
        )?;
        positive("llm.batch_poll_s", self.llm.batch_poll_s, SECONDS)?;
        if self.llm.record.is_some()
            && let Some(models) = &self.llm.models
            && models.iter().any(|m| {
                let m = m.trim_start();
                m.starts_with("batch:") || m == "external" || m.starts_with("external=")
            })
        {
            return Err((
                "llm.record".into(),
                "records live model calls; `external` and `batch:` models make none".into(),
            ));
        }
        Ok(())
    }

    /// The budget, the prompt's settings and the promotion rule.
    fn check_budget_prompt_and_promotion(&self) -> Result<(), (String, String)> {
        const SECONDS: &str = " of seconds";
        positive("budget.max_wall_s", self.budget.max_wall_s, SECONDS)?;
        non_negative("budget.max_cost_usd", self.budget.max_cost_usd, " of USD")?;
        if let Some(t) = self.budget.target_score
            && !t.is_finite()
        {
            return Err((
                "budget.target_score".into(),
                format!("must be a number, not {t}"),
            ));
        }
        at_least_one(
            "prompt.context_budget_tokens",
            self.prompt.context_budget_tokens.map(|v| v as u64),
        )?;
        if let Some(gap) = self.prompt.stagnation_gap
            && !(gap.is_finite() && (0.0..1.0).contains(&gap))
        {
            return Err((
                "prompt.stagnation_gap".into(),
                format!("must be a fraction from 0 to below 1 (0.15 = within 15 %), not {gap}"),
            ));
        }
        self.promotion_rule()
            .map_err(|message| ("promotion".to_string(), message))?;
        if let Some(f) = self.promotion.validate_max_slowdown
            && !(f.is_finite() && f >= 1.0)
        {
            return Err((
                "promotion.validate_max_slowdown".into(),
                format!(
                    "must be a time ratio of at least 1 (1.5 = up to 50 % slower than the seed), not {f}"
                ),
            ));
        }
        Ok(())
    }

    /// The strategy's own settings.
    fn check_strategy(&self) -> Result<(), (String, String)> {
        match &self.strategy {
            Some(StrategyConfig::MapElites(c)) => {
                at_least_one("strategy.islands", Some(c.islands))?;
                let s = &c.selection;
                let weights = [s.uniform, s.fitness, s.curiosity, s.island];
                if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0))
                    || weights.iter().sum::<f64>() <= 0.0
                {
                    return Err((
                        "strategy.selection".into(),
                        "weights must be non-negative numbers, not all 0".into(),
                    ));
                }
                if !(c.decay.is_finite() && c.decay > 0.0 && c.decay <= 1.0) {
                    return Err((
                        "strategy.decay".into(),
                        format!("must be in (0, 1], not {}", c.decay),
                    ));
                }
            }
            Some(StrategyConfig::Islands(c)) => {
                at_least_one("strategy.islands", Some(c.islands))?;
                at_least_one("strategy.population", Some(c.population as u64))?;
                at_least_one("strategy.migration_interval", Some(c.migration_interval))?;
                if !(0.0..=1.0).contains(&c.exploit) {
                    return Err((
                        "strategy.exploit".into(),
                        format!("must be a probability between 0 and 1, not {}", c.exploit),
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

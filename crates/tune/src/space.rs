//! Tunable kernels: the declarations a template carries, the space of
//! configurations they span, and the instantiation of one configuration as
//! an ordinary kernel.
//!
//! ```text
//! // kevo: tune BLOCK_X 32 64 128 256        a parameter and its values
//! // kevo: tune UNROLL 1 2 4
//! // kevo: require BLOCK_X * UNROLL <= 512   a constraint every configuration meets
//! // kevo: block BLOCK_X                     block shapes may use parameters
//! ```
//!
//! A configuration is instantiated by defining each parameter as a macro
//! ahead of the source, followed by `#line 1` so compiler diagnostics keep
//! the template's line numbers, and by writing the values into the block
//! declarations. The tune and require lines become plain comments, so the
//! result is a kernel like any other: the evaluator needs to know nothing
//! about tuning, and every configuration gets the same isolation, checks
//! and score as a hand-written candidate.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::constraint::Constraint;

/// More configurations than this (before constraints) is a mistake in the
/// ranges, not a space anyone will search: enumerating it would take longer
/// than evaluating any budget of it.
pub const MAX_CONFIGURATIONS: u64 = 1_000_000;

const MARKER: &str = "kevo:";

/// One tuned parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parameter {
    pub name: String,
    pub values: Vec<i64>,
    /// 1-based line of its `// kevo: tune`.
    pub line: u32,
}

/// One `// kevo: require` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    pub constraint: Constraint,
    pub line: u32,
}

/// A configuration: for each parameter, in declaration order, the index of
/// its value. Indices rather than values so that strategies can treat every
/// parameter as an ordered axis.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Configuration(pub Vec<usize>);

/// A declaration kevo cannot use, with the line it is on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason} (in `{text}`)")]
pub struct DeclarationError {
    pub line: u32,
    pub text: String,
    pub reason: String,
}

/// The parameters, constraints and valid configurations of a template.
#[derive(Debug, Clone)]
pub struct TuningSpace {
    parameters: Vec<Parameter>,
    requirements: Vec<Requirement>,
    valid: Vec<Configuration>,
    /// Configurations before constraints.
    total: u64,
}

/// Parse a decimal or 0x-hexadecimal integer, with `_` separators.
pub(crate) fn parse_integer(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    let magnitude = match clean
        .strip_prefix("0x")
        .or_else(|| clean.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None if !clean.is_empty() && clean.chars().all(|c| c.is_ascii_digit()) => {
            clean.parse::<i64>().ok()?
        }
        None => return None,
    };
    Some(if negative { -magnitude } else { magnitude })
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The identifier-like runs of `line` (letters, digits, `_`), with their
/// byte ranges.
fn word_runs(line: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = line.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() && !word(bytes[at]) {
            at += 1;
        }
        if at >= bytes.len() {
            return None;
        }
        let start = at;
        while at < bytes.len() && word(bytes[at]) {
            at += 1;
        }
        Some((start, at))
    })
}

/// `(keyword, rest)` of a `// kevo: KEYWORD REST` line.
fn directive(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim().strip_prefix("//")?.trim_start();
    let rest = rest.strip_prefix(MARKER)?.trim_start();
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    Some((&rest[..end], rest[end..].trim()))
}

/// Whether `source` declares any tuned parameter: it is a template, and
/// evaluating it needs a configuration.
pub fn is_template(source: &str) -> bool {
    source
        .lines()
        .any(|l| matches!(directive(l), Some(("tune", _))))
}

/// The macro name a `#define` line defines, if it is one.
fn defined_name(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("define")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Whether `line` is `#ifndef NAME` or `#if !defined(NAME)` / `#if !defined NAME`.
fn guards(line: &str, name: &str) -> bool {
    let Some(rest) = line.trim_start().strip_prefix('#') else {
        return false;
    };
    let rest = rest.trim_start();
    if let Some(r) = rest.strip_prefix("ifndef") {
        return r.trim() == name;
    }
    let Some(r) = rest.strip_prefix("if") else {
        return false;
    };
    let compact: String = r.chars().filter(|c| !c.is_whitespace()).collect();
    compact == format!("!defined({name})") || compact == format!("!defined{name}")
}

impl TuningSpace {
    /// The space a template declares; `Ok(None)` when it declares no
    /// parameter (an ordinary kernel).
    pub fn parse(source: &str) -> Result<Option<TuningSpace>, DeclarationError> {
        let lines: Vec<&str> = source.lines().collect();
        let err = |n: usize, reason: String| DeclarationError {
            line: n as u32 + 1,
            text: lines[n].trim().to_string(),
            reason,
        };
        let mut parameters: Vec<Parameter> = Vec::new();
        let mut requires = Vec::new();
        let mut blocks = Vec::new();
        for (n, line) in lines.iter().enumerate() {
            match directive(line) {
                Some(("tune", rest)) => {
                    let mut words = rest.split_whitespace();
                    let Some(name) = words.next() else {
                        return Err(err(n, "expected `// kevo: tune NAME V1 V2 ...`".into()));
                    };
                    if !is_identifier(name) {
                        return Err(err(n, format!("`{name}` is not a C identifier")));
                    }
                    if let Some(p) = parameters.iter().find(|p| p.name == name) {
                        return Err(err(
                            n,
                            format!("`{name}` is already declared on line {}", p.line),
                        ));
                    }
                    let mut values = Vec::new();
                    for w in words {
                        let v = parse_integer(w).ok_or_else(|| {
                            err(n, format!("`{w}` is not an integer (values are integers)"))
                        })?;
                        if values.contains(&v) {
                            return Err(err(n, format!("the value {v} is listed twice")));
                        }
                        values.push(v);
                    }
                    if values.is_empty() {
                        return Err(err(n, format!("`{name}` has no values")));
                    }
                    parameters.push(Parameter {
                        name: name.to_string(),
                        values,
                        line: n as u32 + 1,
                    });
                }
                Some(("require", rest)) => requires.push((n, rest)),
                Some(("block", rest)) => blocks.push((n, rest)),
                _ => {}
            }
        }
        if parameters.is_empty() {
            return match requires.first() {
                Some(&(n, _)) => Err(err(
                    n,
                    "a constraint without any `// kevo: tune` parameter".into(),
                )),
                None => Ok(None),
            };
        }
        let names: Vec<&str> = parameters.iter().map(|p| p.name.as_str()).collect();
        let mut requirements = Vec::new();
        for (n, text) in requires {
            let constraint = Constraint::parse(text, &names).map_err(|reason| err(n, reason))?;
            requirements.push(Requirement {
                constraint,
                line: n as u32 + 1,
            });
        }
        // A block shape may name parameters and numbers only (its first word
        // may be a kernel, which the evaluator checks).
        for (n, rest) in blocks {
            let Some(shape) = rest.split_whitespace().last() else {
                continue;
            };
            for (a, b) in word_runs(shape) {
                let word = &shape[a..b];
                if !word.as_bytes()[0].is_ascii_digit() && !names.contains(&word) {
                    return Err(err(
                        n,
                        format!(
                            "`{word}` in the block shape is not a tuned parameter ({}); \
                             separate dimensions with `*`, e.g. `BLOCK_X*BLOCK_Y`",
                            names.join(", ")
                        ),
                    ));
                }
            }
        }
        // kevo defines the parameters; a definition of its own would clash
        // (or silently win), unless guarded so the template also compiles alone.
        let mut used = vec![false; parameters.len()];
        let mut previous_directive = "";
        for (n, line) in lines.iter().enumerate() {
            if let Some(defined) = defined_name(line)
                && let Some(i) = names.iter().position(|p| *p == defined)
                && !guards(previous_directive, defined)
            {
                return Err(err(
                    n,
                    format!(
                        "`{defined}` is a tuned parameter (line {}); kevo defines it for each \
                         configuration: remove this #define or guard it with `#ifndef {defined}`",
                        parameters[i].line
                    ),
                ));
            }
            if line.trim_start().starts_with('#') {
                previous_directive = line;
            }
            let kind = directive(line).map(|(k, _)| k);
            if matches!(kind, Some("tune" | "require")) {
                continue;
            }
            for (a, b) in word_runs(line) {
                if let Some(i) = names.iter().position(|p| *p == &line[a..b]) {
                    used[i] = true;
                }
            }
        }
        if let Some(i) = used.iter().position(|u| !u) {
            let n = parameters[i].line as usize - 1;
            return Err(err(
                n,
                format!(
                    "`{}` is declared but the kernel never uses it: every value would \
                     compile the same kernel",
                    parameters[i].name
                ),
            ));
        }
        let total = parameters
            .iter()
            .try_fold(1u64, |acc, p| acc.checked_mul(p.values.len() as u64))
            .unwrap_or(u64::MAX);
        if total > MAX_CONFIGURATIONS {
            let n = parameters.last().expect("not empty").line as usize - 1;
            return Err(err(
                n,
                format!(
                    "the parameters span {total} configurations; kevo searches at most \
                     {MAX_CONFIGURATIONS}: narrow the ranges"
                ),
            ));
        }
        let mut space = TuningSpace {
            parameters,
            requirements,
            valid: Vec::new(),
            total,
        };
        space.valid = space.enumerate();
        if space.valid.is_empty() {
            let n = space.requirements[0].line as usize - 1;
            let lines: Vec<String> = space
                .requirements
                .iter()
                .map(|r| r.line.to_string())
                .collect();
            return Err(err(
                n,
                format!(
                    "no configuration meets the constraints (lines {}): {total} were tried",
                    lines.join(", ")
                ),
            ));
        }
        Ok(Some(space))
    }

    fn enumerate(&self) -> Vec<Configuration> {
        let mut valid = Vec::new();
        let mut index = vec![0usize; self.parameters.len()];
        loop {
            let c = Configuration(index.clone());
            if self.is_valid(&c) {
                valid.push(c);
            }
            // Odometer: the last parameter turns fastest.
            let mut d = self.parameters.len();
            loop {
                if d == 0 {
                    return valid;
                }
                d -= 1;
                index[d] += 1;
                if index[d] < self.parameters[d].values.len() {
                    break;
                }
                index[d] = 0;
            }
        }
    }

    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Every configuration that meets the constraints, in odometer order
    /// (the last parameter turns fastest).
    pub fn valid(&self) -> &[Configuration] {
        &self.valid
    }

    /// Configurations before constraints.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The parameter values of `c`, in declaration order.
    pub fn values(&self, c: &Configuration) -> Vec<i64> {
        self.parameters
            .iter()
            .zip(&c.0)
            .map(|(p, &i)| p.values[i])
            .collect()
    }

    /// Whether `c` has an index in range for every parameter and meets every
    /// constraint.
    pub fn is_valid(&self, c: &Configuration) -> bool {
        c.0.len() == self.parameters.len()
            && self
                .parameters
                .iter()
                .zip(&c.0)
                .all(|(p, &i)| i < p.values.len())
            && {
                let values = self.values(c);
                self.requirements
                    .iter()
                    .all(|r| r.constraint.holds(&values))
            }
    }

    /// The configuration with these values (`NAME=V` pairs, every parameter
    /// named once), or why there is none.
    pub fn configuration(&self, assignments: &[(String, i64)]) -> Result<Configuration, String> {
        let mut index = vec![None; self.parameters.len()];
        for (name, value) in assignments {
            let Some(p) = self.parameters.iter().position(|p| &p.name == name) else {
                return Err(format!("`{name}` is not a tuned parameter"));
            };
            let Some(i) = self.parameters[p].values.iter().position(|v| v == value) else {
                return Err(format!(
                    "{value} is not a value of `{name}` ({})",
                    join(&self.parameters[p].values)
                ));
            };
            if index[p].replace(i).is_some() {
                return Err(format!("`{name}` is given twice"));
            }
        }
        let missing: Vec<&str> = self
            .parameters
            .iter()
            .zip(&index)
            .filter(|(_, i)| i.is_none())
            .map(|(p, _)| p.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(format!("no value for {}", missing.join(", ")));
        }
        let c = Configuration(index.into_iter().map(|i| i.expect("checked")).collect());
        if !self.is_valid(&c) {
            let values = self.values(&c);
            let broken: Vec<String> = self
                .requirements
                .iter()
                .filter(|r| !r.constraint.holds(&values))
                .map(|r| format!("line {}: {}", r.line, r.constraint.text()))
                .collect();
            return Err(format!("the configuration breaks {}", broken.join("; ")));
        }
        Ok(c)
    }

    /// `NAME=V NAME=V`, for tables and logs.
    pub fn describe(&self, c: &Configuration) -> String {
        self.parameters
            .iter()
            .zip(self.values(c))
            .map(|(p, v)| format!("{}={v}", p.name))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `(name, value)` pairs of `c`, for JSON and the store.
    pub fn assignments(&self, c: &Configuration) -> Vec<(String, i64)> {
        self.parameters
            .iter()
            .zip(self.values(c))
            .map(|(p, v)| (p.name.clone(), v))
            .collect()
    }

    /// The kernel of configuration `c`: the parameters defined ahead of
    /// `template` (then `#line 1`, so diagnostics keep the template's line
    /// numbers), the values written into block declarations, and the tune
    /// and require lines turned into plain comments that record the choice.
    pub fn instantiate(&self, template: &str, c: &Configuration) -> String {
        let values = self.values(c);
        let value_of = |word: &str| {
            self.parameters
                .iter()
                .position(|p| p.name == word)
                .map(|i| values[i])
        };
        let mut out = format!("// kevo configuration: {}\n", self.describe(c));
        for (p, v) in self.parameters.iter().zip(&values) {
            out.push_str(&format!("#define {} {v}\n", p.name));
        }
        out.push_str("#line 1\n");
        for (n, line) in template.split_inclusive('\n').enumerate() {
            let body = line.trim_end_matches(['\n', '\r']);
            let ending = &line[body.len()..];
            match directive(body) {
                Some(("tune", rest)) => {
                    let name = rest.split_whitespace().next().unwrap_or("");
                    let chosen = value_of(name).map(|v| v.to_string()).unwrap_or_default();
                    out.push_str(&format!("// tuned: {name} = {chosen} (of {})", {
                        rest.split_whitespace()
                            .skip(1)
                            .collect::<Vec<_>>()
                            .join(" ")
                    }));
                }
                Some(("require", rest)) => out.push_str(&format!("// required: {rest}")),
                Some(("block", _)) => {
                    let mut rewritten = String::new();
                    let mut last = 0;
                    for (a, b) in word_runs(body) {
                        if let Some(v) = value_of(&body[a..b]) {
                            rewritten.push_str(&body[last..a]);
                            rewritten.push_str(&v.to_string());
                            last = b;
                        }
                    }
                    rewritten.push_str(&body[last..]);
                    out.push_str(&rewritten);
                }
                _ => out.push_str(body),
            }
            out.push_str(ending);
            let _ = n;
        }
        out
    }

    /// [`TuningSpace::instantiate`] with `notes` (say, the table of the
    /// configurations tried) as comment lines after the first: what a
    /// proposer reads when this kernel is shown to it again. Comments ahead
    /// of `#line 1` change neither the code nor its line numbers, provided
    /// they stay comments: notes quote compiler messages, which quote the
    /// candidate, so a backslash (or its trigraph `??/`) that would splice
    /// the next line, a `#define` of the values, into the comment, and any
    /// control character, are replaced. The stored kernel then compiles to
    /// exactly the kernel that was measured.
    pub fn instantiate_annotated(&self, template: &str, c: &Configuration, notes: &str) -> String {
        let kernel = self.instantiate(template, c);
        let (first, rest) = kernel.split_once('\n').unwrap_or((&kernel, ""));
        let mut out = format!("{first}\n");
        for line in notes.lines() {
            let safe: String = line
                .chars()
                .map(|ch| match ch {
                    '\\' => '/',
                    ch if ch.is_control() => ' ',
                    ch => ch,
                })
                .collect();
            out.push_str(&format!("// {}\n", safe.replace("??", "?")));
        }
        out.push_str(rest);
        out
    }

    /// The one-step neighbours of `c` that are valid: each parameter moved
    /// to the next lower or higher value.
    pub fn neighbours(&self, c: &Configuration) -> Vec<Configuration> {
        let mut out = Vec::new();
        for (d, p) in self.parameters.iter().enumerate() {
            for step in [-1isize, 1] {
                let i = c.0[d] as isize + step;
                if i < 0 || i as usize >= p.values.len() {
                    continue;
                }
                let mut n = c.clone();
                n.0[d] = i as usize;
                if self.is_valid(&n) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// Valid configurations not in `seen`.
    pub fn unseen<'a>(
        &'a self,
        seen: &'a HashSet<&Configuration>,
    ) -> impl Iterator<Item = &'a Configuration> + 'a {
        self.valid.iter().filter(move |c| !seen.contains(c))
    }
}

fn join(values: &[i64]) -> String {
    values
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

impl fmt::Display for Configuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(usize::to_string).collect();
        write!(f, "[{}]", parts.join(","))
    }
}

#[cfg(test)]
mod tests;

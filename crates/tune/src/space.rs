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

use kevo_tasks::syntax::is_identifier;

use crate::constraint::Constraint;
use crate::integer::parse_integer;
use declarations::{Directives, directive, line_error, word_runs};

mod declarations;

/// More configurations than this (before constraints) is a mistake in the
/// ranges, not a space anyone will search: enumerating it would take longer
/// than evaluating any budget of it.
pub const MAX_CONFIGURATIONS: u64 = 1_000_000;

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

/// Whether `source` declares any tuned parameter: it is a template, and
/// evaluating it needs a configuration.
pub fn is_template(source: &str) -> bool {
    source
        .lines()
        .any(|l| matches!(directive(l), Some(("tune", _))))
}

impl Parameter {
    /// The parameter a `// kevo: tune` line declares on (1-based) line
    /// `line`, from the rest of the line; `earlier` are the parameters
    /// declared above it.
    fn parse(rest: &str, line: u32, earlier: &[Parameter]) -> Result<Parameter, String> {
        let mut words = rest.split_whitespace();
        let Some(name) = words.next() else {
            return Err("expected `// kevo: tune NAME V1 V2 ...`".into());
        };
        if !is_identifier(name) {
            return Err(format!("`{name}` is not a C identifier"));
        }
        if let Some(p) = earlier.iter().find(|p| p.name == name) {
            return Err(format!("`{name}` is already declared on line {}", p.line));
        }
        let mut values = Vec::new();
        for w in words {
            let v = parse_integer(w)
                .ok_or_else(|| format!("`{w}` is not an integer (values are integers)"))?;
            if values.contains(&v) {
                return Err(format!("the value {v} is listed twice"));
            }
            values.push(v);
        }
        if values.is_empty() {
            return Err(format!("`{name}` has no values"));
        }
        Ok(Parameter {
            name: name.to_string(),
            values,
            line,
        })
    }
}

impl TuningSpace {
    /// The space a template declares; `Ok(None)` when it declares no
    /// parameter (an ordinary kernel).
    pub fn parse(source: &str) -> Result<Option<TuningSpace>, DeclarationError> {
        let lines: Vec<&str> = source.lines().collect();
        let Directives {
            parameters,
            requires,
            blocks,
        } = declarations::directives(&lines)?;
        if parameters.is_empty() {
            return match requires.first() {
                Some(&(n, _)) => Err(line_error(
                    &lines,
                    n,
                    "a constraint without any `// kevo: tune` parameter".into(),
                )),
                None => Ok(None),
            };
        }
        let names: Vec<&str> = parameters.iter().map(|p| p.name.as_str()).collect();
        let requirements = declarations::requirements(&lines, &requires, &names)?;
        declarations::check_block_shapes(&lines, &blocks, &names)?;
        declarations::check_definitions(&lines, &parameters)?;
        declarations::check_every_parameter_used(&lines, &parameters)?;
        let total = declarations::count_configurations(&lines, &parameters)?;
        let mut space = TuningSpace {
            parameters,
            requirements,
            valid: Vec::new(),
            total,
        };
        space.valid = space.enumerate();
        if space.valid.is_empty() {
            let n = space.requirements[0].line as usize - 1;
            let constraint_lines: Vec<String> = space
                .requirements
                .iter()
                .map(|r| r.line.to_string())
                .collect();
            return Err(line_error(
                &lines,
                n,
                format!(
                    "no configuration meets the constraints (lines {}): {total} were tried",
                    constraint_lines.join(", ")
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

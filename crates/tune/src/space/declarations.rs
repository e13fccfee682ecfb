//! Reading a template's `// kevo:` lines into a [`TuningSpace`]'s parts,
//! one step per kind of mistake: the directives and their parameters, the
//! constraints, the block shapes, the parameters' `#define`s and uses in
//! the source, and the size of the space. Each step's error names the
//! line it is about.

use super::{DeclarationError, MAX_CONFIGURATIONS, Parameter, Requirement};
use crate::constraint::Constraint;

const MARKER: &str = "kevo:";

/// The identifier-like runs of `line` (letters, digits, `_`), with their
/// byte ranges.
pub(super) fn word_runs(line: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
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
pub(super) fn directive(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim().strip_prefix("//")?.trim_start();
    let rest = rest.strip_prefix(MARKER)?.trim_start();
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    Some((&rest[..end], rest[end..].trim()))
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

/// The error about line `n` (0-based) of `lines`.
pub(super) fn line_error(lines: &[&str], n: usize, reason: String) -> DeclarationError {
    DeclarationError {
        line: n as u32 + 1,
        text: lines[n].trim().to_string(),
        reason,
    }
}

/// The directives of a template: its parameters, read, and the rest of
/// its require and block lines with their (0-based) line numbers, to be
/// read once every parameter is known.
pub(super) struct Directives<'a> {
    pub parameters: Vec<Parameter>,
    pub requires: Vec<(usize, &'a str)>,
    pub blocks: Vec<(usize, &'a str)>,
}

/// Every directive of `lines`, in order; a tune line that declares no
/// usable parameter is an error.
pub(super) fn directives<'a>(lines: &[&'a str]) -> Result<Directives<'a>, DeclarationError> {
    let mut found = Directives {
        parameters: Vec::new(),
        requires: Vec::new(),
        blocks: Vec::new(),
    };
    for (n, line) in lines.iter().enumerate() {
        match directive(line) {
            Some(("tune", rest)) => {
                let parameter = Parameter::parse(rest, n as u32 + 1, &found.parameters)
                    .map_err(|reason| line_error(lines, n, reason))?;
                found.parameters.push(parameter);
            }
            Some(("require", rest)) => found.requires.push((n, rest)),
            Some(("block", rest)) => found.blocks.push((n, rest)),
            _ => {}
        }
    }
    Ok(found)
}

/// The constraints of the require lines, over the parameters `names`.
pub(super) fn requirements(
    lines: &[&str],
    requires: &[(usize, &str)],
    names: &[&str],
) -> Result<Vec<Requirement>, DeclarationError> {
    requires
        .iter()
        .map(|&(n, text)| {
            let constraint =
                Constraint::parse(text, names).map_err(|reason| line_error(lines, n, reason))?;
            Ok(Requirement {
                constraint,
                line: n as u32 + 1,
            })
        })
        .collect()
}

/// A block shape may name parameters and numbers only (its first word may
/// be a kernel, which the evaluator checks).
pub(super) fn check_block_shapes(
    lines: &[&str],
    blocks: &[(usize, &str)],
    names: &[&str],
) -> Result<(), DeclarationError> {
    for &(n, rest) in blocks {
        let Some(shape) = rest.split_whitespace().last() else {
            continue;
        };
        for (a, b) in word_runs(shape) {
            let word = &shape[a..b];
            if !word.as_bytes()[0].is_ascii_digit() && !names.contains(&word) {
                return Err(line_error(
                    lines,
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
    Ok(())
}

/// kevo defines the parameters; a definition of its own would clash (or
/// silently win), unless guarded so the template also compiles alone.
pub(super) fn check_definitions(
    lines: &[&str],
    parameters: &[Parameter],
) -> Result<(), DeclarationError> {
    let mut previous_directive = "";
    for (n, line) in lines.iter().enumerate() {
        if let Some(defined) = defined_name(line)
            && let Some(p) = parameters.iter().find(|p| p.name == defined)
            && !guards(previous_directive, defined)
        {
            return Err(line_error(
                lines,
                n,
                format!(
                    "`{defined}` is a tuned parameter (line {}); kevo defines it for each \
                     configuration: remove this #define or guard it with `#ifndef {defined}`",
                    p.line
                ),
            ));
        }
        if line.trim_start().starts_with('#') {
            previous_directive = line;
        }
    }
    Ok(())
}

/// A parameter the kernel never names (outside its tune and require lines)
/// would compile the same kernel for every value.
pub(super) fn check_every_parameter_used(
    lines: &[&str],
    parameters: &[Parameter],
) -> Result<(), DeclarationError> {
    let mut used = vec![false; parameters.len()];
    for line in lines {
        if matches!(directive(line), Some(("tune" | "require", _))) {
            continue;
        }
        for (a, b) in word_runs(line) {
            if let Some(i) = parameters.iter().position(|p| p.name == line[a..b]) {
                used[i] = true;
            }
        }
    }
    match used.iter().position(|u| !u) {
        Some(i) => Err(line_error(
            lines,
            parameters[i].line as usize - 1,
            format!(
                "`{}` is declared but the kernel never uses it: every value would \
                 compile the same kernel",
                parameters[i].name
            ),
        )),
        None => Ok(()),
    }
}

/// The number of configurations before constraints, at most
/// [`MAX_CONFIGURATIONS`].
pub(super) fn count_configurations(
    lines: &[&str],
    parameters: &[Parameter],
) -> Result<u64, DeclarationError> {
    let total = parameters
        .iter()
        .try_fold(1u64, |acc, p| acc.checked_mul(p.values.len() as u64))
        .unwrap_or(u64::MAX);
    if total > MAX_CONFIGURATIONS {
        let n = parameters.last().expect("not empty").line as usize - 1;
        return Err(line_error(
            lines,
            n,
            format!(
                "the parameters span {total} configurations; kevo searches at most \
                 {MAX_CONFIGURATIONS}: narrow the ranges"
            ),
        ));
    }
    Ok(total)
}

//! What a candidate's preprocessing directives may name. A compiler opens
//! any file a directive names, and its diagnostics echo the file's tokens,
//! so a candidate could read the user's files through it. A candidate may
//! include only kevo's own headers (pasted in by kevo, so no file is read)
//! and, in CUDA, the toolkit headers NVRTC is given; every other way of
//! naming a file is a rejected candidate with the reason:
//!
//! - `#include`, `#include_next`, `#import` of anything else, or of a
//!   macro-built name (`#include PATH(x)`): the argument must be a literal;
//! - `#embed`, `__has_include`, `__has_include_next`, `__has_embed`;
//! - `#line N "file"` (a line number alone is fine);
//! - `#pragma GCC dependency` and `include_alias`, in a directive or a
//!   `_Pragma` string;
//! - an `#if`/`#elif` that uses a macro built with `##` (directly or
//!   through other macros): pasting could spell `__has_include` where no
//!   text shows it;
//! - trigraphs (`??=` is `#` to some compilers).
//!
//! Comments and line splices are handled as the preprocessor does, so a
//! directive split by `\` or hidden in a comment is judged as the compiler
//! sees it; `%:` is `#`.

use std::collections::{BTreeMap, BTreeSet};

use kevo_backend::Dialect;

/// kevo's own headers: name and text.
const KEVO_HEADERS: &[(&str, &str)] = &[("kevo/hash.h", include_str!("../include/kevo/hash.h"))];

/// CUDA toolkit headers a candidate may include (NVRTC resolves them from
/// the toolkit's include directory, which holds nothing of the user's).
const CUDA_HEADERS: &[&str] = &[
    "cuda_fp16.h",
    "cuda_bf16.h",
    "cuda_fp8.h",
    "mma.h",
    "cuda_pipeline.h",
    "cuda_pipeline_primitives.h",
    "cooperative_groups.h",
    "cooperative_groups/reduce.h",
    "cooperative_groups/memcpy_async.h",
    "cooperative_groups/scan.h",
    "cuda/barrier",
    "cuda/pipeline",
    "cuda/atomic",
    "cuda/std/cstdint",
    "cuda/std/limits",
    "cuda/std/type_traits",
];

/// Identifiers that probe the filesystem.
const PROBES: &[&str] = &["__has_include", "__has_include_next", "__has_embed"];

/// Pragmas that name a file.
const FILE_PRAGMAS: &[&str] = &["dependency", "include_alias"];

/// Why a candidate was refused, at which line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub line: usize,
    pub reason: String,
}

/// One logical line: comments replaced by a space, splices joined.
struct Line {
    /// Physical line where it starts.
    first: usize,
    /// Physical line where it ends.
    last: usize,
    text: String,
}

fn logical_lines(source: &str) -> Result<Vec<Line>, Refusal> {
    #[derive(PartialEq)]
    enum State {
        Code,
        LineComment,
        BlockComment,
        Quoted(char),
    }
    let chars: Vec<char> = source.chars().collect();
    let mut lines = Vec::new();
    let mut text = String::new();
    let (mut physical, mut first) = (1usize, 1usize);
    let mut state = State::Code;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // A splice joins lines in every state.
        if c == '\\' && chars.get(i + 1) == Some(&'\n') {
            physical += 1;
            i += 2;
            continue;
        }
        if c == '\\' && chars.get(i + 1) == Some(&'\r') && chars.get(i + 2) == Some(&'\n') {
            physical += 1;
            i += 3;
            continue;
        }
        if c == '?'
            && chars.get(i + 1) == Some(&'?')
            && state != State::LineComment
            && state != State::BlockComment
            && let Some(t) = chars.get(i + 2)
            && "=/'()!<>-".contains(*t)
        {
            return Err(Refusal {
                line: physical,
                reason: format!("the trigraph ??{t} is not allowed"),
            });
        }
        match state {
            State::Code => match c {
                '/' if chars.get(i + 1) == Some(&'/') => {
                    state = State::LineComment;
                    i += 1;
                }
                '/' if chars.get(i + 1) == Some(&'*') => {
                    state = State::BlockComment;
                    text.push(' ');
                    i += 1;
                }
                '"' | '\'' => {
                    state = State::Quoted(c);
                    text.push(c);
                }
                '\n' => {
                    lines.push(Line {
                        first,
                        last: physical,
                        text: std::mem::take(&mut text),
                    });
                    physical += 1;
                    first = physical;
                }
                _ => text.push(c),
            },
            State::LineComment => {
                if c == '\n' {
                    state = State::Code;
                    lines.push(Line {
                        first,
                        last: physical,
                        text: std::mem::take(&mut text),
                    });
                    physical += 1;
                    first = physical;
                }
            }
            State::BlockComment => {
                if c == '*' && chars.get(i + 1) == Some(&'/') {
                    state = State::Code;
                    i += 1;
                } else if c == '\n' {
                    physical += 1;
                }
            }
            State::Quoted(q) => {
                text.push(c);
                if c == '\\' {
                    if let Some(&n) = chars.get(i + 1) {
                        text.push(n);
                        i += 1;
                    }
                } else if c == q {
                    state = State::Code;
                } else if c == '\n' {
                    // An unterminated literal ends at the line, as in C.
                    text.pop();
                    state = State::Code;
                    lines.push(Line {
                        first,
                        last: physical,
                        text: std::mem::take(&mut text),
                    });
                    physical += 1;
                    first = physical;
                }
            }
        }
        i += 1;
    }
    lines.push(Line {
        first,
        last: physical,
        text,
    });
    Ok(lines)
}

/// Identifiers outside string and character literals.
fn identifiers(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'"' || b == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != b {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(&text[start..i]);
        } else if b.is_ascii_digit() {
            // A pp-number (1e5f, 0x1F) is not an identifier.
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'.')
            {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The directive of a logical line: its name and the rest.
fn directive(text: &str) -> Option<(&str, &str)> {
    let t = text.trim_start();
    let rest = t
        .strip_prefix('#')
        .or_else(|| t.strip_prefix("%:"))?
        .trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some((&rest[..end], rest[end..].trim()))
}

fn header_name(argument: &str) -> Option<&str> {
    let a = argument.trim();
    let inner = a
        .strip_prefix('<')
        .and_then(|r| r.strip_suffix('>'))
        .or_else(|| a.strip_prefix('"').and_then(|r| r.strip_suffix('"')))?;
    (!inner.is_empty()).then_some(inner)
}

fn allowed(name: &str, dialect: Dialect) -> bool {
    KEVO_HEADERS.iter().any(|(n, _)| *n == name)
        || (dialect == Dialect::Cuda && CUDA_HEADERS.contains(&name))
}

fn allowed_list(dialect: Dialect) -> String {
    let mut names: Vec<&str> = KEVO_HEADERS.iter().map(|(n, _)| *n).collect();
    if dialect == Dialect::Cuda {
        names.extend(CUDA_HEADERS);
    }
    names.join(", ")
}

/// Check `source` and return what the compiler gets: the source with
/// kevo's headers pasted in (line numbers kept by `#line`), or the reason
/// it is refused.
pub fn prepare(source: &str, dialect: Dialect) -> Result<String, Refusal> {
    if dialect == Dialect::Triton {
        // Python has no preprocessor: `#` starts a comment. What a Triton
        // module may hold is checked by the helper before anything of it
        // runs (imports of triton, triton.language and math, constants and
        // @triton.jit functions only).
        return Ok(source.to_string());
    }
    let lines = logical_lines(source)?;
    let refuse = |line: usize, reason: String| Err(Refusal { line, reason });
    // Macros whose definition pastes tokens, and which macros use which.
    let mut pastes: BTreeSet<String> = BTreeSet::new();
    let mut uses: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut conditions: Vec<(usize, Vec<String>)> = Vec::new();
    let mut pasted: BTreeMap<usize, (usize, &str)> = BTreeMap::new();
    for line in &lines {
        for id in identifiers(&line.text) {
            if PROBES.contains(&id) {
                return refuse(
                    line.first,
                    format!("`{id}` probes the filesystem and is not allowed"),
                );
            }
        }
        if line.text.contains("_Pragma") && FILE_PRAGMAS.iter().any(|p| line.text.contains(p)) {
            return refuse(
                line.first,
                "a `_Pragma` that names a file is not allowed".into(),
            );
        }
        let Some((name, argument)) = directive(&line.text) else {
            continue;
        };
        match name {
            "include" | "include_next" | "import" => match header_name(argument) {
                Some(h) if name == "include" && allowed(h, dialect) => {
                    if let Some((_, text)) = KEVO_HEADERS.iter().find(|(n, _)| *n == h) {
                        pasted.insert(line.first, (line.last, text));
                    }
                }
                Some(h) => {
                    return refuse(
                        line.first,
                        format!(
                            "#{name} \"{h}\" is not allowed: a candidate may include only {}",
                            allowed_list(dialect)
                        ),
                    );
                }
                None => {
                    return refuse(
                        line.first,
                        format!(
                            "#{name} needs a literal <header> or \"header\" name, not `{argument}`"
                        ),
                    );
                }
            },
            "embed" => return refuse(line.first, "#embed reads a file and is not allowed".into()),
            "line" if argument.contains('"') => {
                return refuse(line.first, "#line with a file name is not allowed".into());
            }
            "pragma"
                if FILE_PRAGMAS
                    .iter()
                    .any(|p| argument.split_whitespace().any(|w| w == *p)) =>
            {
                return refuse(
                    line.first,
                    format!("#pragma {argument} names a file and is not allowed"),
                );
            }
            "define" => {
                let ids = identifiers(argument);
                if let Some((macro_name, body)) = ids.split_first() {
                    if argument.contains("##") || argument.contains("%:%:") {
                        pastes.insert(macro_name.to_string());
                    }
                    uses.insert(
                        macro_name.to_string(),
                        body.iter().map(|s| s.to_string()).collect(),
                    );
                }
            }
            "if" | "elif" => {
                conditions.push((
                    line.first,
                    identifiers(argument)
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                ));
            }
            _ => {}
        }
    }
    // Everything that reaches a pasting macro.
    loop {
        let before = pastes.len();
        for (name, body) in &uses {
            if body.iter().any(|b| pastes.contains(b)) {
                pastes.insert(name.clone());
            }
        }
        if pastes.len() == before {
            break;
        }
    }
    for (line, ids) in conditions {
        if let Some(m) = ids.iter().find(|i| pastes.contains(*i)) {
            return refuse(
                line,
                format!(
                    "#if uses `{m}`, which pastes tokens with ##: it could spell a filesystem probe"
                ),
            );
        }
    }
    if pasted.is_empty() {
        return Ok(source.to_string());
    }
    let mut out = String::with_capacity(source.len());
    let mut skip_through = 0;
    for (i, text) in source.split_inclusive('\n').enumerate() {
        let n = i + 1;
        if n <= skip_through {
            continue;
        }
        match pasted.get(&n) {
            Some(&(last, header)) => {
                out.push_str(header);
                if !header.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&format!("#line {}\n", last + 1));
                skip_through = last;
            }
            None => out.push_str(text),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "__kernel void k(__global float* y) { y[0] = 1.0f; }\n";

    fn refused(src: &str, dialect: Dialect) -> Refusal {
        prepare(src, dialect).expect_err(src)
    }

    #[test]
    fn every_way_of_naming_a_file_is_refused_with_its_line() {
        for (src, line, needle) in [
            ("#include \"/home/u/.env\"\n", 1, "is not allowed"),
            (
                "\n#include \"../../../../home/u/.env\"\n",
                2,
                "is not allowed",
            ),
            ("#define P(x) #x\n#include P(/home/u/.env)\n", 2, "literal"),
            ("#define F \"/etc/passwd\"\n#include F\n", 2, "literal"),
            ("  %:  include </etc/passwd>\n", 1, "is not allowed"),
            ("#inc\\\nlude \"/etc/passwd\"\n", 1, "is not allowed"),
            ("# /* c */ include \"/etc/passwd\"\n", 1, "is not allowed"),
            ("#include_next <stdio.h>\n", 1, "is not allowed"),
            ("#import \"x.h\"\n", 1, "is not allowed"),
            (
                "#if __has_include(\"/home/u/.ssh/id_rsa\")\n#endif\n",
                1,
                "probes the filesystem",
            ),
            ("#define H __has_include\n", 1, "probes the filesystem"),
            ("#embed \"/home/u/.env\"\n", 1, "#embed"),
            (
                "const char k[] = {\n#embed </etc/passwd>\n};\n",
                2,
                "#embed",
            ),
            ("#line 7 \"/home/u/.env\"\n", 1, "file name"),
            (
                "#pragma GCC dependency \"/home/u/.env\"\n",
                1,
                "names a file",
            ),
            ("_Pragma(\"GCC dependency \\\"/x\\\"\")\n", 1, "_Pragma"),
            (
                "#define CAT(a, b) a##b\n#define PROBE CAT(__has_, include)\n#if PROBE(\"/x\")\n#endif\n",
                3,
                "pastes tokens",
            ),
            ("??=include \"/etc/passwd\"\n", 1, "trigraph"),
        ] {
            let r = refused(&format!("{src}{BODY}"), Dialect::OpenCl);
            assert_eq!(r.line, line, "{src}: {r:?}");
            assert!(r.reason.contains(needle), "{src}: {r:?}");
        }
    }

    #[test]
    fn honest_sources_pass_unchanged() {
        for src in [
            BODY.to_string(),
            format!("// #include \"/etc/passwd\" in a comment\n/* __has_include */\n{BODY}"),
            format!("const char* s = \"#include </etc/passwd>\";\n{BODY}"),
            format!("#define LOAD(i) float v##i = y[i]\n#line 40\n#pragma unroll\n{BODY}"),
            format!("#if defined(FOO) && 1e5f > 2\n#endif\n{BODY}"),
        ] {
            assert_eq!(prepare(&src, Dialect::OpenCl).unwrap(), src);
        }
        let cuda = format!("#include <cuda_fp16.h>\n#include <cooperative_groups.h>\n{BODY}");
        assert_eq!(prepare(&cuda, Dialect::Cuda).unwrap(), cuda);
        assert!(
            refused(&cuda, Dialect::OpenCl)
                .reason
                .contains("kevo/hash.h")
        );
    }

    #[test]
    fn kevo_headers_are_pasted_in_and_line_numbers_kept() {
        let src = format!("// x\n#include <kevo/hash.h>\n{BODY}");
        let out = prepare(&src, Dialect::OpenCl).unwrap();
        assert!(!out.contains("#include"));
        assert!(out.contains("kevo_fmix32"));
        let after = out
            .split("#line 3\n")
            .nth(1)
            .expect("a #line after the header");
        assert_eq!(after, BODY);
    }
}

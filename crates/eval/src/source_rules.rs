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
//! In OpenCL C, where a CPU device (PoCL) runs the kernel as native code
//! inside the worker, also what reaches machine code of the candidate's
//! choosing ([`OPENCL_NATIVE`]): inline assembly (`asm`, `__asm`,
//! `__asm__`: system calls) and placing data in a code section (the
//! `section` attribute, `#pragma clang section` and the MS section
//! pragmas: bytes in `.text` run without `asm`), also when a macro spells
//! them or a `_Pragma` string holds them; and `##` pasting in a source
//! whose identifiers could be pasted into one of them (`CAT(as, m)`).
//! CUDA keeps inline PTX: it runs on the GPU and makes no system call.
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

/// Identifiers refused in OpenCL C, with why: each reaches machine code of
/// the candidate's choosing on a CPU device, where the kernel runs inside
/// the worker. `_asm` is MSVC's spelling; the `*_seg` and `alloc_text`
/// pragmas are the MS forms of `#pragma clang section`.
const OPENCL_NATIVE: &[(&str, &str)] = &[
    ("asm", ASM),
    ("__asm", ASM),
    ("__asm__", ASM),
    ("_asm", ASM),
    ("section", SECTION),
    ("__section__", SECTION),
    ("code_seg", SECTION),
    ("const_seg", SECTION),
    ("data_seg", SECTION),
    ("bss_seg", SECTION),
    ("alloc_text", SECTION),
];
const ASM: &str = "is inline assembly, which runs as native code in the worker on a CPU device";
const SECTION: &str = "places code or data in a chosen section (bytes placed in .text run as machine code on a CPU device)";

/// One operand of a `##` chain in a macro body: a token spelled there, or
/// a parameter (whose argument's adjacent token is pasted).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Operand<'a> {
    Literal(&'a str),
    Param,
}

/// The `##` chains of a `#define` (the text after `define`): each chain's
/// operands in order. `#x` stringizes, so it pastes as a literal that is
/// no identifier.
fn paste_sites(definition: &str) -> Vec<Vec<Operand<'_>>> {
    let d = definition.trim_start();
    let name_end = d
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(d.len());
    let (mut params, mut body) = (Vec::new(), &d[name_end..]);
    if let Some(rest) = body.strip_prefix('(') {
        let close = rest.find(')').unwrap_or(rest.len());
        params = rest[..close]
            .split(',')
            .map(|p| p.trim().trim_end_matches("...").trim())
            .collect();
        params.push("__VA_ARGS__");
        body = rest.get(close + 1..).unwrap_or("");
    }
    let tokens = macro_tokens(body);
    // `__VA_OPT__(...)` next to `##` pastes a token inside the parentheses:
    // every operand of such a macro counts as a parameter.
    let va_opt = tokens.contains(&"__VA_OPT__");
    let operand = |k: usize| -> Operand<'_> {
        if va_opt || params.contains(&tokens[k]) {
            if k > 0 && tokens[k - 1] == "#" {
                Operand::Literal("\"")
            } else {
                Operand::Param
            }
        } else {
            Operand::Literal(tokens[k])
        }
    };
    let mut sites = Vec::new();
    let mut k = 0;
    while k < tokens.len() {
        if tokens[k] != "##" && tokens.get(k + 1) == Some(&"##") {
            let mut site = vec![operand(k)];
            while tokens.get(k + 1) == Some(&"##") && k + 2 < tokens.len() {
                k += 2;
                site.push(operand(k));
            }
            sites.push(site);
        }
        k += 1;
    }
    sites
}

/// The tokens of a macro body: identifiers and numbers, literals, `##`,
/// `#`, punctuators (`%:%:` and `%:` spelled as `##` and `#`).
fn macro_tokens(body: &str) -> Vec<&str> {
    let bytes = body.as_bytes();
    let mut tokens: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'.')
            {
                i += 1;
            }
        } else if b == b'"' || b == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != b {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(bytes.len());
        } else if body[i..].starts_with("##") {
            i += 2;
        } else if body[i..].starts_with("%:%:") {
            i += 4;
        } else if body[i..].starts_with("%:") {
            i += 2;
        } else {
            i += body[i..].chars().next().map_or(1, char::len_utf8);
        }
        tokens.push(if &body[start..i] == "%:%:" {
            "##"
        } else if &body[start..i] == "%:" {
            "#"
        } else {
            &body[start..i]
        });
    }
    tokens
}

/// Whether `t` splits into the operands of `site`: literals as spelled,
/// parameters as tokens in `known` or nothing (an empty argument).
/// Returns the parts.
fn site_makes(site: &[Operand<'_>], t: &str, known: &BTreeSet<String>) -> Option<Vec<String>> {
    let Some((first, rest)) = site.split_first() else {
        return t.is_empty().then(Vec::new);
    };
    let heads: Vec<usize> = match first {
        Operand::Literal(l) => t.starts_with(l).then_some(l.len()).into_iter().collect(),
        Operand::Param => (0..=t.len())
            .filter(|&n| t.is_char_boundary(n) && (n == 0 || known.contains(&t[..n])))
            .collect(),
    };
    for n in heads {
        if let Some(mut parts) = site_makes(rest, &t[n..], known) {
            if n > 0 {
                parts.insert(0, t[..n].to_string());
            }
            return Some(parts);
        }
    }
    None
}

/// Whether the `##` chains (`sites`, each with its line) can paste `word`
/// from the source's identifiers (`ids`), directly or through tokens that
/// other pastes made. Tokens that matter are substrings of `word`, so this
/// is a small fixpoint over them. Returns the line of a chain that makes
/// it and its parts.
fn pasted_into(
    word: &str,
    sites: &[(usize, Vec<Operand<'_>>)],
    ids: &BTreeSet<&str>,
) -> Option<(usize, Vec<String>)> {
    let substrings: BTreeSet<&str> = (0..word.len())
        .flat_map(|a| (a + 1..=word.len()).map(move |b| &word[a..b]))
        .collect();
    // "_" stands for what a predefined macro may add
    // (`__USER_LABEL_PREFIX__` on some targets).
    let mut known: BTreeSet<String> = substrings
        .iter()
        .filter(|t| ids.contains(*t) || **t == "_")
        .map(|t| t.to_string())
        .collect();
    loop {
        let mut grew = false;
        for t in &substrings {
            if known.contains(*t) {
                continue;
            }
            for (line, site) in sites {
                if let Some(parts) = site_makes(site, t, &known) {
                    if *t == word {
                        return Some((*line, parts));
                    }
                    known.insert(t.to_string());
                    grew = true;
                    break;
                }
            }
        }
        if !grew {
            return None;
        }
    }
}

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

/// Where the scan of `logical_lines` is: in code, a comment or a literal.
#[derive(PartialEq)]
enum State {
    Code,
    LineComment,
    BlockComment,
    Quoted(char),
}

/// The scan of `logical_lines`: the lines so far, the one being built,
/// the physical line it is at and where the logical line started.
struct Scan {
    lines: Vec<Line>,
    text: String,
    physical: usize,
    first: usize,
    state: State,
}

impl Scan {
    /// End the logical line at a newline: the next starts on the next
    /// physical line.
    fn end_line(&mut self) {
        self.lines.push(Line {
            first: self.first,
            last: self.physical,
            text: std::mem::take(&mut self.text),
        });
        self.physical += 1;
        self.first = self.physical;
    }

    /// Character `c` in code, `next` after it: a comment or a literal may
    /// start, a newline ends the line. Returns how many characters after
    /// `c` it took too.
    fn code(&mut self, c: char, next: Option<&char>) -> usize {
        match c {
            '/' if next == Some(&'/') => {
                self.state = State::LineComment;
                1
            }
            '/' if next == Some(&'*') => {
                self.state = State::BlockComment;
                self.text.push(' ');
                1
            }
            '"' | '\'' => {
                self.state = State::Quoted(c);
                self.text.push(c);
                0
            }
            '\n' => {
                self.end_line();
                0
            }
            _ => {
                self.text.push(c);
                0
            }
        }
    }

    /// Character `c` in a `//` comment: dropped; a newline ends it and the
    /// line.
    fn line_comment(&mut self, c: char) {
        if c == '\n' {
            self.state = State::Code;
            self.end_line();
        }
    }

    /// Character `c` in a `/* */` comment, `next` after it: dropped, the
    /// physical lines counted. Returns how many characters after `c` it
    /// took too.
    fn block_comment(&mut self, c: char, next: Option<&char>) -> usize {
        if c == '*' && next == Some(&'/') {
            self.state = State::Code;
            return 1;
        } else if c == '\n' {
            self.physical += 1;
        }
        0
    }

    /// Character `c` in a literal opened by `q`, `next` after it: kept, an
    /// escape with the character it escapes. Returns how many characters
    /// after `c` it took too.
    fn quoted(&mut self, q: char, c: char, next: Option<&char>) -> usize {
        self.text.push(c);
        if c == '\\' {
            if let Some(&n) = next {
                self.text.push(n);
                return 1;
            }
        } else if c == q {
            self.state = State::Code;
        } else if c == '\n' {
            // An unterminated literal ends at the line, as in C.
            self.text.pop();
            self.state = State::Code;
            self.end_line();
        }
        0
    }
}

/// Length of the line splice (`\` then a line feed, or `\` then CR LF) at
/// `i`, if one is there.
fn splice_at(chars: &[char], i: usize) -> Option<usize> {
    if chars[i] == '\\' && chars.get(i + 1) == Some(&'\n') {
        return Some(2);
    }
    if chars[i] == '\\' && chars.get(i + 1) == Some(&'\r') && chars.get(i + 2) == Some(&'\n') {
        return Some(3);
    }
    None
}

/// The last character of the trigraph at `i` (`??=` is `#` to some
/// compilers), if one is there.
fn trigraph_at(chars: &[char], i: usize) -> Option<char> {
    if chars[i] == '?'
        && chars.get(i + 1) == Some(&'?')
        && let Some(t) = chars.get(i + 2)
        && "=/'()!<>-".contains(*t)
    {
        return Some(*t);
    }
    None
}

/// The logical lines of `source`, as the preprocessor sees them: splices
/// joined in every state, comments replaced by a space, literals kept
/// whole; a trigraph outside comments is refused.
fn logical_lines(source: &str) -> Result<Vec<Line>, Refusal> {
    let chars: Vec<char> = source.chars().collect();
    let mut scan = Scan {
        lines: Vec::new(),
        text: String::new(),
        physical: 1,
        first: 1,
        state: State::Code,
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // A splice joins lines in every state.
        if let Some(len) = splice_at(&chars, i) {
            scan.physical += 1;
            i += len;
            continue;
        }
        if scan.state != State::LineComment
            && scan.state != State::BlockComment
            && let Some(t) = trigraph_at(&chars, i)
        {
            return Err(Refusal {
                line: scan.physical,
                reason: format!("the trigraph ??{t} is not allowed"),
            });
        }
        let next = chars.get(i + 1);
        let taken = match scan.state {
            State::Code => scan.code(c, next),
            State::LineComment => {
                scan.line_comment(c);
                0
            }
            State::BlockComment => scan.block_comment(c, next),
            State::Quoted(q) => scan.quoted(q, c, next),
        };
        i += 1 + taken;
    }
    scan.lines.push(Line {
        first: scan.first,
        last: scan.physical,
        text: scan.text,
    });
    Ok(scan.lines)
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
    let mut directives = Directives::default();
    for line in &lines {
        check_identifiers(line, dialect)?;
        check_pragma_operators(line, dialect)?;
        if let Some((name, argument)) = directive(&line.text) {
            directives.take(line, name, argument, dialect)?;
        }
    }
    // Pasting builds identifiers from the source's own tokens, so in
    // OpenCL C no `##` chain may be able to make a refused identifier.
    if dialect == Dialect::OpenCl && !directives.sites.is_empty() {
        refuse_native_pastes(&lines, &directives)?;
    }
    directives.refuse_pasting_conditions()?;
    if directives.pasted.is_empty() {
        return Ok(source.to_string());
    }
    Ok(paste_headers(source, &directives.pasted))
}

/// A refusal of the candidate at `line`, for `?`.
fn refuse<T>(line: usize, reason: String) -> Result<T, Refusal> {
    Err(Refusal { line, reason })
}

/// What `prepare` gathers from the directives, for the checks that need
/// the whole source.
#[derive(Default)]
struct Directives<'a> {
    /// Macros whose definition pastes tokens (growing to those that reach
    /// one through others).
    pastes: BTreeSet<String>,
    /// Which macros each macro uses.
    uses: BTreeMap<String, Vec<String>>,
    /// The identifiers of every `#if` and `#elif`, each with its line.
    conditions: Vec<(usize, Vec<String>)>,
    /// kevo headers to paste in: the `#include`'s first line, its last
    /// line and the header's text.
    pasted: BTreeMap<usize, (usize, &'static str)>,
    /// The `##` chains of every macro, each with its line.
    sites: Vec<(usize, Vec<Operand<'a>>)>,
}

impl<'a> Directives<'a> {
    /// Check directive `name` (with `argument`) of `line`, refusing what
    /// names a file, and record what the later checks need.
    fn take(
        &mut self,
        line: &Line,
        name: &str,
        argument: &'a str,
        dialect: Dialect,
    ) -> Result<(), Refusal> {
        match name {
            "include" | "include_next" | "import" => self.include(line, name, argument, dialect)?,
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
            "define" => self.define(line, argument),
            "if" | "elif" => {
                self.conditions.push((
                    line.first,
                    identifiers(argument)
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// An `#include` (or `#include_next`, `#import`): only a literal name
    /// of an allowed header passes, and a kevo header is pasted in.
    fn include(
        &mut self,
        line: &Line,
        name: &str,
        argument: &str,
        dialect: Dialect,
    ) -> Result<(), Refusal> {
        match header_name(argument) {
            Some(h) if name == "include" && allowed(h, dialect) => {
                if let Some((_, text)) = KEVO_HEADERS.iter().find(|(n, _)| *n == h) {
                    self.pasted.insert(line.first, (line.last, text));
                }
                Ok(())
            }
            Some(h) => refuse(
                line.first,
                format!(
                    "#{name} \"{h}\" is not allowed: a candidate may include only {}",
                    allowed_list(dialect)
                ),
            ),
            None => refuse(
                line.first,
                format!("#{name} needs a literal <header> or \"header\" name, not `{argument}`"),
            ),
        }
    }

    /// A `#define`: which macros it uses, and its `##` chains if it pastes.
    fn define(&mut self, line: &Line, argument: &'a str) {
        let ids = identifiers(argument);
        if let Some((macro_name, body)) = ids.split_first() {
            if argument.contains("##") || argument.contains("%:%:") {
                self.pastes.insert(macro_name.to_string());
                self.sites
                    .extend(paste_sites(argument).into_iter().map(|s| (line.first, s)));
            }
            self.uses.insert(
                macro_name.to_string(),
                body.iter().map(|s| s.to_string()).collect(),
            );
        }
    }

    /// Every macro that reaches a pasting macro pastes too; an `#if` or
    /// `#elif` that uses one is refused, as pasting could spell a
    /// filesystem probe where no text shows it.
    fn refuse_pasting_conditions(&mut self) -> Result<(), Refusal> {
        // Everything that reaches a pasting macro.
        loop {
            let before = self.pastes.len();
            for (name, body) in &self.uses {
                if body.iter().any(|b| self.pastes.contains(b)) {
                    self.pastes.insert(name.clone());
                }
            }
            if self.pastes.len() == before {
                break;
            }
        }
        for (line, ids) in &self.conditions {
            if let Some(m) = ids.iter().find(|i| self.pastes.contains(*i)) {
                return refuse(
                    *line,
                    format!(
                        "#if uses `{m}`, which pastes tokens with ##: it could spell a filesystem probe"
                    ),
                );
            }
        }
        Ok(())
    }
}

/// The identifiers of `line` no candidate may use: a filesystem probe, and
/// in OpenCL C what reaches machine code.
fn check_identifiers(line: &Line, dialect: Dialect) -> Result<(), Refusal> {
    for id in identifiers(&line.text) {
        if PROBES.contains(&id) {
            return refuse(
                line.first,
                format!("`{id}` probes the filesystem and is not allowed"),
            );
        }
        if dialect == Dialect::OpenCl
            && let Some((_, why)) = OPENCL_NATIVE.iter().find(|(w, _)| *w == id)
        {
            return refuse(
                line.first,
                format!("`{id}` is not allowed in OpenCL C: it {why}"),
            );
        }
    }
    Ok(())
}

/// The `_Pragma` operators of `line`, judged by the pragma inside the
/// string: in OpenCL C none may name what reaches machine code, and none
/// may name a file.
fn check_pragma_operators(line: &Line, dialect: Dialect) -> Result<(), Refusal> {
    if dialect == Dialect::OpenCl && line.text.contains("_Pragma") {
        // The pragma inside the string, as the compiler destringizes it.
        let inside = line.text.replace(['"', '\\'], " ");
        if let Some((w, why)) = identifiers(&inside)
            .into_iter()
            .find_map(|id| OPENCL_NATIVE.iter().find(|(w, _)| *w == id))
        {
            return refuse(
                line.first,
                format!("a `_Pragma` naming `{w}` is not allowed in OpenCL C: it {why}"),
            );
        }
    }
    if line.text.contains("_Pragma") && FILE_PRAGMAS.iter().any(|p| line.text.contains(p)) {
        return refuse(
            line.first,
            "a `_Pragma` that names a file is not allowed".into(),
        );
    }
    Ok(())
}

/// In OpenCL C: no `##` chain of the source may be able to paste a refused
/// identifier from the source's identifiers (kevo's pasted headers'
/// included).
fn refuse_native_pastes(lines: &[Line], directives: &Directives<'_>) -> Result<(), Refusal> {
    let ids: BTreeSet<&str> = lines
        .iter()
        .flat_map(|l| identifiers(&l.text))
        .chain(
            directives
                .pasted
                .values()
                .flat_map(|(_, text)| identifiers(text)),
        )
        .collect();
    for (word, why) in OPENCL_NATIVE {
        if let Some((line, parts)) = pasted_into(word, &directives.sites, &ids) {
            return refuse(
                line,
                format!(
                    "this macro pastes tokens with ##, which could make `{word}` \
                     (from {}); `{word}` is not allowed in OpenCL C: it {why}; rename \
                     the pieces or do without ##",
                    parts
                        .iter()
                        .map(|p| format!("`{p}`"))
                        .collect::<Vec<_>>()
                        .join(" + ")
                ),
            );
        }
    }
    Ok(())
}

/// `source` with each kevo header's `#include` replaced by the header's
/// text, then a `#line` that keeps the source's own line numbers.
fn paste_headers(source: &str, pasted: &BTreeMap<usize, (usize, &str)>) -> String {
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
    out
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
    fn what_reaches_machine_code_is_refused_in_opencl_with_its_line() {
        for (src, line, needle) in [
            (
                "__kernel void k(__global float* y) {\n  __asm__ volatile(\"syscall\");\n}\n",
                2,
                "`__asm__` is not allowed in OpenCL C",
            ),
            (
                "void f(void) { asm(\"nop\"); }\n",
                1,
                "`asm` is not allowed",
            ),
            (
                "void f(void) { __asm(\"nop\"); }\n",
                1,
                "`__asm` is not allowed",
            ),
            (
                "void f(void) { asm goto(\"jmp %l0\" :::: out); out:; }\n",
                1,
                "inline assembly",
            ),
            ("register long r asm(\"rsp\");\n", 1, "`asm`"),
            ("__asm__(\".globl f; f: syscall; ret\");\n", 1, "`__asm__`"),
            ("long s(long) __asm__(\"syscall\");\n", 1, "`__asm__`"),
            ("#define A asm\nvoid f(void) { A(\"nop\"); }\n", 1, "`asm`"),
            ("#define A a\\\nsm\n", 1, "`asm`"),
            (
                "#define CAT(a, b) a##b\nvoid f(void) { CAT(as, m)(\"syscall\"); }\n",
                1,
                "could make `asm` (from `as` + `m`)",
            ),
            (
                "\n#define CAT(x, y) x %:%: y\n#define XCAT(x, y) CAT(x, y)\nvoid f(void) { XCAT(XCAT(_, _a), sm)(\"nop\"); }\n",
                2,
                "could make `__asm`",
            ),
            (
                "__constant uchar c[8] __attribute__((section(\".text.k\"))) = {0xc3};\n",
                1,
                "`section` is not allowed",
            ),
            (
                "#define S(x) __attribute__((__section__(x)))\n",
                1,
                "`__section__`",
            ),
            ("#pragma clang section rodata=\".text.k\"\n", 1, "`section`"),
            (
                "\n_Pragma(\"clang section text=\\\".k\\\"\")\n",
                2,
                "a `_Pragma` naming `section`",
            ),
            ("#pragma code_seg(\".k\")\n", 1, "`code_seg`"),
            (
                "#define X as ## m\n",
                1,
                "could make `asm` (from `as` + `m`)",
            ),
            (
                "#define V(x, ...) x ## __VA_OPT__(m)\nV(as, 1)(\"nop\");\n",
                1,
                "could make `asm`",
            ),
            (
                "#define U(x) __##x\nU(asm__)(\"nop\");\n",
                1,
                "could make `__asm__` (from `__` + `asm__`)",
            ),
            (
                "#define CAT(a, b) a##b\n#define P CAT(sec, tion)\n",
                1,
                "could make `section` (from `sec` + `tion`)",
            ),
        ] {
            let r = refused(&format!("{src}{BODY}"), Dialect::OpenCl);
            assert_eq!(r.line, line, "{src}: {r:?}");
            assert!(r.reason.contains(needle), "{src}: {r:?}");
        }
    }

    #[test]
    fn cuda_keeps_inline_ptx_and_honest_pasting_passes() {
        let ptx = "__global__ void k(unsigned* y) {\n  unsigned lane;\n  asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n  y[0] = lane;\n}\n";
        assert_eq!(prepare(ptx, Dialect::Cuda).unwrap(), ptx);
        // Pasting whose pieces spell nothing refused, and words that
        // merely contain a refused one.
        for src in [
            format!("#define LOAD(i) float v##i = y[i]\n{BODY}"),
            format!("#define CAT(a, b) a##b\nfloat CAT(sum, 0) = 0.0f;\n{BODY}"),
            format!("float sections, asmx, my_asm;\n{BODY}"),
            // The translator's float atomics: `kevo_atomic_add_float_##space`
            // and `__##space` can make nothing refused, whatever else the
            // kernel names (`a`, `sm`, `as`, `m`).
            format!(
                "#define ATOMIC(space) float kevo_atomic_add_float_##space(volatile __##space float* p)\nATOMIC(global)\nfloat a, sm, as, m;\n{BODY}"
            ),
        ] {
            assert_eq!(prepare(&src, Dialect::OpenCl).unwrap(), src);
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

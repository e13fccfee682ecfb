//! The rewrite: built-ins and names token by token, then the program's
//! structure (file-scope items, functions, declarations) for what needs
//! context: address spaces and the element type behind an atomic.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::TranslateError;
use crate::lex::{Kind, Tok, lex};

mod names;
mod pass;

use names::{
    BUILTIN_INDICES, KNOWN_UNDERSCORED, PRELUDE_CALLS, REFUSED, RENAMES, THREE_VECTORS,
    is_builtin_type,
};
use pass::{Edit, Pass};

const PRELUDE: &str = include_str!("prelude.cl");

/// Where a pointer points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Global,
    Local,
    Constant,
    Private,
    /// Not known yet (a `__device__` function's parameter before its
    /// callers are read).
    Unknown,
}

impl Space {
    fn qualifier(self) -> &'static str {
        match self {
            Space::Global => "__global ",
            Space::Local => "__local ",
            Space::Constant => "__constant ",
            Space::Private | Space::Unknown => "",
        }
    }
    fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Local => "local (__shared__)",
            Space::Constant => "constant",
            Space::Private => "private",
            Space::Unknown => "unknown",
        }
    }
}

/// Translate a CUDA C++ kernel source to OpenCL C 1.2 (see the crate
/// documentation). The result starts with the prelude pieces it uses and
/// a `#line 1`, so compiler messages name the CUDA source's lines.
pub fn cuda_to_opencl(source: &str) -> Result<String, TranslateError> {
    let mut t = Translator::new(source);
    t.refuse_untranslatable()?;
    t.rewrite_tokens()?;
    t.structure()?;
    t.infer_and_qualify()?;
    Ok(t.finish())
}

struct Param {
    name: String,
    pointer: bool,
    /// The type words without qualifiers, e.g. "unsigned int".
    elem: String,
    /// Token index the address-space qualifier goes before.
    first_tok: usize,
    line: u32,
}

struct Function {
    name: String,
    kernel: bool,
    params: Vec<Param>,
    /// Positions in `code` of the body's braces.
    body: (usize, usize),
}

#[derive(Clone)]
struct Sym {
    space: Space,
    /// Pointers and arrays have an address space worth following.
    indirect: bool,
    elem: String,
}

struct Translator {
    toks: Vec<Tok>,
    /// The text each token prints as.
    out: Vec<String>,
    /// Token indices of the program's structure: code outside macro bodies
    /// and outside removed `extern "C" { }` wrappers.
    code: Vec<usize>,
    pieces: BTreeSet<&'static str>,
    user_types: HashSet<String>,
    functions: Vec<Function>,
    /// File-scope `__constant` arrays and values.
    constants: HashMap<String, Sym>,
}

impl Translator {
    fn new(source: &str) -> Self {
        let toks = lex(source);
        let out = toks.iter().map(|t| t.text.clone()).collect();
        Translator {
            toks,
            out,
            code: Vec::new(),
            pieces: BTreeSet::new(),
            user_types: HashSet::new(),
            functions: Vec::new(),
            constants: HashMap::new(),
        }
    }

    fn finish(self) -> String {
        let mut text = String::new();
        for piece in &self.pieces {
            text.push_str(prelude_piece(piece));
        }
        text.push_str("#line 1\n");
        text.extend(self.out);
        text
    }

    /// Next non-trivia token after `i` (macro bodies included).
    fn next_tok(&self, i: usize) -> Option<usize> {
        (i + 1..self.toks.len()).find(|&j| self.toks[j].kind != Kind::Trivia)
    }

    fn unsupported(&self, i: usize, construct: &str, why: &str) -> TranslateError {
        TranslateError::Unsupported {
            line: self.toks[i].line,
            construct: construct.to_string(),
            why: why.to_string(),
        }
    }

    fn refuse_untranslatable(&self) -> Result<(), TranslateError> {
        let defined: HashSet<String> = self
            .toks
            .iter()
            .filter(|t| t.kind == Kind::Directive)
            .filter_map(|t| {
                t.text
                    .trim_start_matches('#')
                    .trim_start()
                    .strip_prefix("define")
                    .map(|rest| {
                        rest.trim_start()
                            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or("")
                            .to_string()
                    })
            })
            .collect();
        for (i, t) in self.toks.iter().enumerate() {
            match t.kind {
                Kind::Directive => {
                    let body = t.text.trim_start_matches('#').trim_start();
                    if body.starts_with("include") {
                        return Err(self.unsupported(
                            i,
                            "#include",
                            "a kernel must be one self-contained source",
                        ));
                    }
                }
                Kind::Punct if t.text == "::" => {
                    return Err(self.unsupported(i, "`::`", "C++ scopes"));
                }
                Kind::Ident => {
                    if let Some((_, why)) = REFUSED.iter().find(|(w, _)| *w == t.text) {
                        return Err(self.unsupported(i, &format!("`{}`", t.text), why));
                    }
                    if t.text.starts_with("__")
                        && !KNOWN_UNDERSCORED.contains(&t.text.as_str())
                        && !RENAMES.iter().any(|(c, _)| *c == t.text)
                        && !PRELUDE_CALLS.iter().any(|(c, _, _)| *c == t.text)
                        && !defined.contains(&t.text)
                    {
                        return Err(self.unsupported(
                            i,
                            &format!("`{}`", t.text),
                            "a CUDA intrinsic the translator does not know",
                        ));
                    }
                    if t.text == "extern"
                        && self
                            .next_tok(i)
                            .is_some_and(|j| self.toks[j].is("__shared__"))
                    {
                        return Err(self.unsupported(
                            i,
                            "`extern __shared__`",
                            "dynamic shared memory is sized by the launch, which OpenCL passes as a kernel argument",
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Rewrites that need no context beyond the next few tokens.
    fn rewrite_tokens(&mut self) -> Result<(), TranslateError> {
        let mut wrapper_braces = HashSet::new();
        let mut i = 0;
        while i < self.toks.len() {
            match self.toks[i].kind {
                Kind::Ident => i = self.rewrite_ident(i, &mut wrapper_braces)?,
                Kind::Number => self.rewrite_number(i),
                _ => {}
            }
            i += 1;
        }
        self.code = (0..self.toks.len())
            .filter(|&j| {
                self.toks[j].is_code() && !self.toks[j].in_macro && !wrapper_braces.contains(&j)
            })
            .collect();
        Ok(())
    }

    /// The rewrite of identifier `i`: a CUDA keyword, cast or attribute,
    /// else a name ([`Translator::rewrite_name`]). Returns the last token
    /// it consumed, where the walk goes on after.
    fn rewrite_ident(
        &mut self,
        i: usize,
        wrapper_braces: &mut HashSet<usize>,
    ) -> Result<usize, TranslateError> {
        let t = self.toks[i].clone();
        let next = self.next_tok(i);
        let next_is = |s: &str| next.is_some_and(|j| self.toks[j].is(s));
        match t.text.as_str() {
            "extern" if next.is_some_and(|j| self.toks[j].text == "\"C\"") => {
                self.drop_extern_c(i, next.unwrap(), wrapper_braces)?;
            }
            "static_cast" | "reinterpret_cast" if next_is("<") => {
                self.angle_cast(i, next.unwrap())?;
            }
            "static_cast" | "reinterpret_cast" | "const_cast" => {
                return Err(self.unsupported(i, &format!("`{}`", t.text), "use a C cast"));
            }
            "__global__" => self.out[i] = "__kernel".into(),
            "__device__" | "__host__" | "__forceinline__" | "__noinline__" | "__inline__"
            | "inline" => self.out[i].clear(),
            "__shared__" => self.out[i] = "__local".into(),
            "__constant__" => self.out[i] = "__constant".into(),
            "__restrict__" => self.out[i] = "restrict".into(),
            "nullptr" => self.out[i] = "0".into(),
            "warpSize" => self.out[i] = "32".into(),
            "constexpr" => self.out[i] = "const".into(),
            "long" if next_is("long") => self.out[i].clear(),
            "__launch_bounds__" | "__align__" if next_is("(") => {
                let close = self.matching(next.unwrap())?;
                for j in i..=close {
                    self.out[j].clear();
                }
                return Ok(close);
            }
            word => return self.rewrite_name(i, word, next),
        }
        Ok(i)
    }

    /// `extern "C"` (token `i`, literal `lit`) goes, with the braces of an
    /// `extern "C" { }` wrapper, which are then no part of the structure.
    fn drop_extern_c(
        &mut self,
        i: usize,
        lit: usize,
        wrapper_braces: &mut HashSet<usize>,
    ) -> Result<(), TranslateError> {
        self.out[i].clear();
        self.out[lit].clear();
        if let Some(open) = self.next_tok(lit)
            && self.toks[open].is("{")
        {
            let close = self.matching(open)?;
            self.out[open].clear();
            self.out[close].clear();
            wrapper_braces.insert(open);
            wrapper_braces.insert(close);
        }
        Ok(())
    }

    /// `reinterpret_cast<T>(e)` (token `i`, `<` at `lt`) -> `((T)(e))`.
    fn angle_cast(&mut self, i: usize, lt: usize) -> Result<(), TranslateError> {
        let gt = (lt..self.toks.len())
            .find(|&j| self.toks[j].is(">"))
            .ok_or_else(|| self.unsupported(i, "an unclosed cast", "cut off"))?;
        let open = self.next_tok(gt).filter(|&j| self.toks[j].is("("));
        let Some(open) = open else {
            return Err(self.unsupported(i, &format!("`{}`", self.toks[i].text), "expected `(`"));
        };
        let close = self.matching(open)?;
        self.out[i].clear();
        self.out[lt] = "((".into();
        self.out[gt] = ")".into();
        self.out[close] = "))".into();
        Ok(())
    }

    /// A name that is no keyword: a thread-index built-in, a renamed or
    /// prelude call, a `make_` vector, a fixed-width integer type. Returns
    /// the last token it consumed.
    fn rewrite_name(
        &mut self,
        i: usize,
        word: &str,
        next: Option<usize>,
    ) -> Result<usize, TranslateError> {
        if let Some((_, query)) = BUILTIN_INDICES.iter().find(|(c, _)| *c == word) {
            return self.builtin_index(i, word, query, next);
        } else if let Some((_, cl)) = RENAMES.iter().find(|(c, _)| *c == word) {
            self.renamed_call(i, word, cl, next)?;
        } else if let Some((_, cl, piece)) = PRELUDE_CALLS.iter().find(|(c, _, _)| *c == word) {
            self.out[i] = (*cl).into();
            self.pieces.insert(piece);
        } else if let Some(ty) = word.strip_prefix("make_") {
            if is_builtin_type(ty) {
                self.out[i] = format!("({ty})");
            }
        } else if word.ends_with("_t") && word.starts_with(['i', 'u']) && is_builtin_type(word) {
            self.pieces.insert("fixed_width_integers");
        }
        Ok(i)
    }

    /// `threadIdx.x` and kin -> `((uint)get_local_id(0))`: OpenCL has one
    /// query per dimension. Returns the axis's token.
    fn builtin_index(
        &mut self,
        i: usize,
        word: &str,
        query: &str,
        next: Option<usize>,
    ) -> Result<usize, TranslateError> {
        let dot = next.filter(|&j| self.toks[j].is("."));
        let axis = dot
            .and_then(|d| self.next_tok(d))
            .filter(|&a| matches!(self.toks[a].text.as_str(), "x" | "y" | "z"));
        let (Some(_), Some(axis)) = (dot, axis) else {
            return Err(self.unsupported(
                i,
                &format!("`{word}` without .x, .y or .z"),
                "OpenCL has one query per dimension",
            ));
        };
        let d = match self.toks[axis].text.as_str() {
            "x" => 0,
            "y" => 1,
            _ => 2,
        };
        self.out[i] = format!("((uint){query}({d}))");
        for j in i + 1..=axis {
            self.out[j].clear();
        }
        Ok(axis)
    }

    /// A call of a CUDA function OpenCL names `cl` (only calls are
    /// translated).
    fn renamed_call(
        &mut self,
        i: usize,
        word: &str,
        cl: &str,
        next: Option<usize>,
    ) -> Result<(), TranslateError> {
        if !next.is_some_and(|j| self.toks[j].is("(")) {
            return Err(self.unsupported(
                i,
                &format!("`{word}` not called"),
                "only calls are translated",
            ));
        }
        if word.starts_with("__syncthreads") || word.starts_with("__threadfence") {
            // `__syncthreads()` -> `barrier(...)`: drop the
            // empty argument list.
            let open = next.unwrap();
            let close = self.matching(open)?;
            for j in open..=close {
                self.out[j].clear();
            }
        }
        self.out[i] = cl.into();
        Ok(())
    }

    /// `1ull` / `1ll`: OpenCL's 64-bit literals are `ul` / `l`.
    fn rewrite_number(&mut self, i: usize) {
        let text = &self.toks[i].text;
        let lower = text.to_ascii_lowercase();
        let cut = if lower.ends_with("ull") || lower.ends_with("llu") {
            Some((3, "ul"))
        } else if lower.ends_with("ll") {
            Some((2, "l"))
        } else {
            None
        };
        if let Some((n, suffix)) = cut {
            self.out[i] = format!("{}{suffix}", &text[..text.len() - n]);
        }
    }

    /// The token closing the bracket at token `open` (macro bodies are
    /// not mixed with code).
    fn matching(&self, open: usize) -> Result<usize, TranslateError> {
        let (o, c) = match self.toks[open].text.as_str() {
            "(" => ("(", ")"),
            "[" => ("[", "]"),
            _ => ("{", "}"),
        };
        let in_macro = self.toks[open].in_macro;
        let mut depth = 0;
        for j in open..self.toks.len() {
            let t = &self.toks[j];
            if t.kind != Kind::Punct || t.in_macro != in_macro {
                continue;
            }
            if t.text == o {
                depth += 1;
            } else if t.text == c {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
        }
        Err(self.unsupported(open, &format!("an unclosed `{o}`"), "the source is cut off"))
    }

    // ---- structure, over positions in `code` ----

    fn c(&self, p: usize) -> &Tok {
        &self.toks[self.code[p]]
    }

    /// The text of position `p`, empty past the end.
    fn text(&self, p: usize) -> &str {
        self.code.get(p).map_or("", |&i| self.toks[i].text.as_str())
    }

    /// Position in `code` of the bracket closing the one at position `p`.
    fn close_of(&self, p: usize) -> Result<usize, TranslateError> {
        let (o, c) = match self.text(p) {
            "(" => ("(", ")"),
            "[" => ("[", "]"),
            _ => ("{", "}"),
        };
        let mut depth = 0;
        for q in p..self.code.len() {
            if self.c(q).kind != Kind::Punct {
                continue;
            }
            if self.text(q) == o {
                depth += 1;
            } else if self.text(q) == c {
                depth -= 1;
                if depth == 0 {
                    return Ok(q);
                }
            }
        }
        Err(self.unsupported(
            self.code[p],
            &format!("an unclosed `{o}`"),
            "the source is cut off",
        ))
    }

    fn is_type_word(&self, word: &str) -> bool {
        is_builtin_type(word) || self.user_types.contains(word)
    }

    /// File-scope items: functions, struct and typedef definitions,
    /// constants; anything else at file scope is refused.
    fn structure(&mut self) -> Result<(), TranslateError> {
        let mut p = 0;
        while p < self.code.len() {
            let start = p;
            let mut params: Option<(usize, usize)> = None;
            let mut end = None;
            let mut q = p;
            while q < self.code.len() {
                match self.text(q) {
                    ";" => {
                        end = Some((q, false));
                        break;
                    }
                    "(" => {
                        let close = self.close_of(q)?;
                        let attribute = q > start
                            && matches!(
                                self.text(q - 1),
                                "__launch_bounds__" | "__attribute__" | "__align__"
                            );
                        if params.is_none() && !attribute && q > start {
                            params = Some((q, close));
                        }
                        q = close + 1;
                    }
                    "{" => {
                        let close = self.close_of(q)?;
                        if q > start && self.text(q - 1) == ")" && params.is_some() {
                            end = Some((close, true));
                            break;
                        }
                        q = close + 1;
                    }
                    _ => q += 1,
                }
            }
            let Some((end, is_function)) = end else {
                return Err(self.unsupported(
                    self.code[start],
                    "a file-scope item without `;`",
                    "the source is cut off",
                ));
            };
            if is_function {
                let (open, close) = params.expect("a function has parameters");
                let body_open = (open..end)
                    .find(|&b| self.text(b) == "{" && self.text(b - 1) == ")")
                    .expect("the body follows the parameters");
                self.function(start, open, close, (body_open, end))?;
            } else {
                self.file_scope_declaration(start, end, params)?;
            }
            p = end + 1;
        }
        Ok(())
    }

    fn function(
        &mut self,
        start: usize,
        open: usize,
        close: usize,
        body: (usize, usize),
    ) -> Result<(), TranslateError> {
        let name = self.text(open - 1).to_string();
        let kernel = (start..open).any(|p| self.text(p) == "__global__");
        if !kernel && (start..open).any(|p| self.text(p) == "*") {
            return Err(self.unsupported(
                self.code[open - 1],
                &format!("`{name}` returning a pointer"),
                "the address space of a returned pointer cannot be followed",
            ));
        }
        // A second function of the same name is the other branch of an
        // `#if` (the translation sees both); true C++ overloading fails to
        // compile, which the evaluation reports.
        let mut params = Vec::new();
        let mut from = open + 1;
        for p in open + 1..=close {
            let at_comma =
                p == close || (self.text(p) == "," && self.depth_between(open + 1, p) == 0);
            if !at_comma {
                continue;
            }
            if from < p {
                params.push(self.param(from, p)?);
            }
            from = p + 1;
        }
        params.retain(|p| p.name != "void" || p.pointer);
        if kernel {
            for param in &params {
                if param.pointer && THREE_VECTORS.contains(&param.elem.as_str()) {
                    return Err(TranslateError::Unsupported {
                        line: param.line,
                        construct: format!("`{}` (a buffer of {})", param.name, param.elem),
                        why: "a 3-component vector is 12 bytes in CUDA memory and 16 in OpenCL memory".into(),
                    });
                }
            }
        }
        self.functions.push(Function {
            name,
            kernel,
            params,
            body,
        });
        Ok(())
    }

    /// Bracket depth of position `p` counted from `from`.
    fn depth_between(&self, from: usize, p: usize) -> i32 {
        let mut depth = 0;
        for q in from..p {
            match self.text(q) {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                _ => {}
            }
        }
        depth
    }

    /// One parameter, positions `[from, to)`.
    fn param(&self, from: usize, to: usize) -> Result<Param, TranslateError> {
        let first_tok = self.code[from];
        for p in from..to {
            match self.text(p) {
                "&" => {
                    return Err(self.unsupported(
                        self.code[p],
                        "a C++ reference parameter",
                        "pass a pointer",
                    ));
                }
                "=" => {
                    return Err(self.unsupported(self.code[p], "a default argument", "C has none"));
                }
                _ => {}
            }
        }
        let pointer = (from..to).any(|p| matches!(self.text(p), "*" | "["));
        let name_pos = (from..to)
            .rev()
            .find(|&p| self.c(p).kind == Kind::Ident)
            .unwrap_or(from);
        let elem = (from..to)
            .filter(|&p| p != name_pos && self.c(p).kind == Kind::Ident)
            .map(|p| self.text(p))
            .filter(|w| !matches!(*w, "const" | "volatile" | "__restrict__" | "restrict"))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(Param {
            name: self.text(name_pos).to_string(),
            pointer,
            elem,
            first_tok,
            line: self.toks[first_tok].line,
        })
    }

    /// A file-scope declaration `[start, end]` (`end` is its `;`).
    fn file_scope_declaration(
        &mut self,
        start: usize,
        end: usize,
        params: Option<(usize, usize)>,
    ) -> Result<(), TranslateError> {
        let words: Vec<String> = (start..end).map(|p| self.text(p).to_string()).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        if words.first() == Some(&"typedef") {
            if let Some(name) = (start..end).rev().find(|&p| self.c(p).kind == Kind::Ident) {
                self.user_types.insert(self.text(name).to_string());
            }
            return Ok(());
        }
        if let Some(s) = words.iter().position(|w| *w == "struct")
            && let Some(name) = words.get(s + 1).filter(|w| **w != "{")
        {
            let name = name.to_string();
            self.user_types.insert(name.clone());
            // `struct P { ... };` names a type in C++; in C only with a
            // typedef.
            if words.get(s + 2) == Some(&"{") && self.text(end - 1) == "}" {
                let first = self.code[start + s];
                self.out[first].insert_str(0, "typedef ");
                let semi = self.code[end];
                self.out[semi].insert_str(0, &format!(" {name}"));
            }
            return Ok(());
        }
        if params.is_some() && !words.contains(&"=") {
            // A prototype: left as written.
            return Ok(());
        }
        if words.contains(&"__device__") {
            return Err(self.unsupported(
                self.code[start],
                "a `__device__` variable",
                "OpenCL C 1.2 has no writable file-scope memory; pass a buffer",
            ));
        }
        let constant = words.contains(&"__constant__");
        if !constant && !words.iter().any(|w| matches!(*w, "const" | "constexpr")) {
            return Err(self.unsupported(
                self.code[start],
                "a writable file-scope variable",
                "OpenCL C 1.2 allows only constants at file scope",
            ));
        }
        if !constant {
            let first = self.code[start];
            self.out[first].insert_str(0, "__constant ");
        }
        // Its name: the identifier before `[` or `=`.
        let name_pos = (start..end)
            .find(|&p| matches!(self.text(p + 1), "[" | "=" | ";"))
            .filter(|&p| self.c(p).kind == Kind::Ident);
        if let Some(n) = name_pos {
            let elem = (start..n)
                .map(|p| self.text(p))
                .filter(|w| self.is_type_word(w) || matches!(*w, "unsigned" | "signed"))
                .collect::<Vec<_>>()
                .join(" ");
            self.constants.insert(
                self.text(n).to_string(),
                Sym {
                    space: Space::Constant,
                    indirect: self.text(n + 1) == "[",
                    elem,
                },
            );
        }
        Ok(())
    }

    // ---- address spaces ----

    /// Learn every `__device__` function parameter's address space from
    /// its callers (to a fixed point: callers may be device functions
    /// themselves), then qualify every pointer.
    fn infer_and_qualify(&mut self) -> Result<(), TranslateError> {
        let mut spaces: HashMap<(usize, usize), (Space, u32)> = HashMap::new();
        for _ in 0..=self.functions.len() + 1 {
            let mut learned = HashMap::new();
            for f in 0..self.functions.len() {
                let mut pass = Pass::new(self, f, &spaces, false);
                pass.run()?;
                for (key, (space, line)) in pass.calls {
                    merge(&mut learned, key, space, line, &self.functions)?;
                }
            }
            if learned == spaces {
                break;
            }
            spaces = learned;
        }
        for f in 0..self.functions.len() {
            let mut pass = Pass::new(self, f, &spaces, true);
            pass.run()?;
            let edits = std::mem::take(&mut pass.edits);
            let pieces = std::mem::take(&mut pass.pieces);
            drop(pass);
            for (tok, edit) in edits {
                match edit {
                    Edit::Prefix(s) => self.out[tok].insert_str(0, s),
                    Edit::Replace(s) => self.out[tok] = s,
                }
            }
            self.pieces.extend(pieces);
        }
        Ok(())
    }
}

fn merge(
    learned: &mut HashMap<(usize, usize), (Space, u32)>,
    key: (usize, usize),
    space: Space,
    line: u32,
    functions: &[Function],
) -> Result<(), TranslateError> {
    if space == Space::Unknown {
        return Ok(());
    }
    match learned.get(&key) {
        Some((known, _)) if *known != space => Err(TranslateError::MixedSpaces {
            line,
            name: format!(
                "{}'s parameter `{}`",
                functions[key.0].name, functions[key.0].params[key.1].name
            ),
            first: known.name(),
            second: space.name(),
        }),
        _ => {
            learned.insert(key, (space, line));
            Ok(())
        }
    }
}

fn prelude_piece(name: &str) -> &'static str {
    let marker = format!("//@ piece {name}\n");
    let start = PRELUDE
        .find(&marker)
        .map(|s| s + marker.len())
        .unwrap_or_else(|| panic!("prelude.cl has no piece {name}"));
    let end = PRELUDE[start..]
        .find("//@ piece ")
        .map_or(PRELUDE.len(), |e| start + e);
    &PRELUDE[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> String {
        cuda_to_opencl(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
    }

    fn refused(src: &str) -> String {
        cuda_to_opencl(src)
            .map(|out| panic!("translated:\n{out}"))
            .unwrap_err()
            .to_string()
    }

    /// The code after the prelude, whitespace runs made one space.
    fn code(out: &str) -> String {
        let body = out.split_once("#line 1\n").unwrap().1;
        body.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn kernel_arguments_are_global_and_indices_are_queries() {
        let out = ok(
            "extern \"C\" __global__ void __launch_bounds__(256) k(const float* __restrict__ x, float* y, unsigned int n) {\n\
                      unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                      if (i < n) y[i] = sqrtf(x[i]) + (float)gridDim.y;\n}\n",
        );
        assert_eq!(
            code(&out),
            "__kernel void k(__global const float* restrict x, __global float* y, unsigned int n) { \
             unsigned int i = ((uint)get_group_id(0)) * ((uint)get_local_size(0)) + ((uint)get_local_id(0)); \
             if (i < n) y[i] = sqrt(x[i]) + (float)((uint)get_num_groups(1)); }"
        );
        assert!(out.starts_with("#line 1\n"), "no prelude needed: {out}");
    }

    #[test]
    fn device_function_parameters_take_their_callers_spaces() {
        // `line` is called with a global and a __shared__ pointer; `inner`
        // only through `line`, so its space comes two calls deep.
        let out = ok("__device__ float inner(const float* p) { return p[0]; }\n\
                      __device__ void line(const float* in, float* tile, float* acc) {\n\
                      tile[threadIdx.x] = inner(in); __syncthreads(); acc[0] += tile[0]; }\n\
                      __global__ void k(const float* in, float* out) {\n\
                      __shared__ float tile[64]; float acc = 0.0f;\n\
                      line(in + 4, tile, &acc); out[0] = acc; }\n");
        let c = code(&out);
        assert!(c.contains("float inner(__global const float* p)"), "{c}");
        assert!(
            c.contains("void line(__global const float* in, __local float* tile, float* acc)"),
            "{c}"
        );
        assert!(c.contains("__local float tile[64];"), "{c}");
        assert!(
            c.contains("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"),
            "{c}"
        );
    }

    #[test]
    fn local_pointers_and_casts_follow_what_they_point_at() {
        let out = ok("__global__ void k(const float* x, float* y) {\n\
                      __shared__ float s[32];\n\
                      const float* row = x + 8; float* t; t = s;\n\
                      float4 v = *((const float4*)row); float4 w = reinterpret_cast<const float4*>(t)[0];\n\
                      ((float4*)y)[0] = make_float4(v.x, w.y, 0.0f, 1.0f); }\n");
        let c = code(&out);
        assert!(c.contains("__global const float* row = x + 8;"), "{c}");
        assert!(c.contains("__local float* t; t = s;"), "{c}");
        assert!(c.contains("*((__global const float4*)row)"), "{c}");
        assert!(c.contains("((__local const float4*)(t))[0]"), "{c}");
        assert!(
            c.contains("((__global float4*)y)[0] = (float4)(v.x, w.y, 0.0f, 1.0f);"),
            "{c}"
        );
    }

    #[test]
    fn atomics_follow_the_element_type() {
        let out = ok("__global__ void k(unsigned int* n, float* f, int* m) {\n\
                      __shared__ float acc[4];\n\
                      atomicAdd(&n[0], 1u); atomicCAS(m, 0, 1); atomicAdd(f, 1.5f); atomicAdd(&acc[1], 2.0f); atomicExch(f + 1, 0.0f); }\n");
        let c = code(&out);
        assert!(c.contains("atomic_add(&n[0], 1u);"), "{c}");
        assert!(c.contains("atomic_cmpxchg(m, 0, 1);"), "{c}");
        assert!(c.contains("kevo_atomic_add_float_global(f, 1.5f);"), "{c}");
        assert!(
            c.contains("kevo_atomic_add_float_local(&acc[1], 2.0f);"),
            "{c}"
        );
        assert!(c.contains("atomic_xchg(f + 1, 0.0f);"), "{c}");
        // The helpers come from the prelude, ahead of `#line 1`.
        let prelude = out.split_once("#line 1\n").unwrap().0;
        assert!(prelude.contains("KEVO_ATOMIC_ADD_FLOAT(global)"));
        assert!(prelude.contains("KEVO_ATOMIC_ADD_FLOAT(local)"));
        assert!(
            refused("__global__ void k(float* f) { atomicMax(f, 1.0f); }")
                .contains("atomicMax` on float")
        );
        assert!(
            refused("__global__ void k(unsigned long long* f) { atomicAdd(f, 1ull); }")
                .contains("on unsigned long long")
        );
    }

    #[test]
    fn file_scope_constants_structs_and_literals() {
        let out = ok(
            "__constant__ float W[3] = {1.0f, 2.0f, 1.0f};\nconst int R = 1;\n\
                      struct P { float x; float y; };\n\
                      __device__ __forceinline__ float w(int i) { return W[i]; }\n\
                      __global__ void k(float* y, const P* p) { uint64_t big = 1ull << 40; long long s = 2ll; \
                      float sn, cs; sincosf(y[0], &sn, &cs); y[0] = w(R) + p[0].x + fmaxf(sn, cs) + (float)(big + s); }\n",
        );
        let c = code(&out);
        assert!(c.starts_with("__constant float W[3] = {1.0f, 2.0f, 1.0f}; __constant const int R = 1; typedef struct P { float x; float y; } P;"), "{c}");
        assert!(c.contains("float w(int i) { return W[i]; }"), "{c}");
        assert!(c.contains("__global const P* p"), "{c}");
        assert!(c.contains("uint64_t big = 1ul << 40; long s = 2l;"), "{c}");
        assert!(
            c.contains("kevo_sincosf(y[0], &sn, &cs)") && c.contains("fmax(sn, cs)"),
            "{c}"
        );
        let prelude = out.split_once("#line 1\n").unwrap().0;
        assert!(
            prelude.contains("typedef ulong uint64_t;") && prelude.contains("#define kevo_sincosf")
        );
    }

    #[test]
    fn comments_block_declarations_and_line_numbers_are_kept() {
        let src = "// kevo: block 128\n/* two\n lines */\n#define IDX (blockIdx.x * 128 + threadIdx.x)\n\
                   __global__ void k(float* y) {\n#pragma unroll\n  for (int i = 0; i < 4; i++) y[IDX] += 1.0f;\n}\n";
        let out = ok(src);
        let body = out.split_once("#line 1\n").unwrap().1;
        assert_eq!(body.lines().count(), src.lines().count());
        assert!(body.starts_with("// kevo: block 128\n/* two\n lines */\n#define IDX (((uint)get_group_id(0)) * 128 + ((uint)get_local_id(0)))\n"), "{body}");
        assert!(body.contains("\n#pragma unroll\n"), "{body}");
    }

    #[test]
    fn what_has_no_faithful_translation_is_refused_with_its_line() {
        for (src, says) in [
            (
                "__global__ void k(float* y) {\n y[0] = __shfl_down_sync(0xffffffff, y[0], 1); }",
                "line 2: `__shfl_down_sync`",
            ),
            (
                "template <int B>\n__global__ void k(float* y) { y[0] = B; }",
                "line 1: `template`",
            ),
            (
                "#include <cuda_fp16.h>\n__global__ void k(float* y) {}",
                "line 1: #include",
            ),
            (
                "__global__ void k(float* y) {\n extern __shared__ float s[]; y[0] = s[0]; }",
                "line 2: `extern __shared__`",
            ),
            (
                "__global__ void k(const float3* p, float* y) { y[0] = p[0].x; }",
                "a 3-component vector is 12 bytes",
            ),
            (
                "__device__ float g[4];\n__global__ void k(float* y) { y[0] = g[0]; }",
                "a `__device__` variable",
            ),
            (
                "float scratch[4];\n__global__ void k(float* y) { y[0] = scratch[0]; }",
                "writable file-scope variable",
            ),
            (
                "__device__ void f(float& r) { r = 1.0f; }\n__global__ void k(float* y) { f(y[0]); }",
                "C++ reference parameter",
            ),
            (
                "__device__ float* f(float* p) { return p; }\n__global__ void k(float* y) { f(y)[0] = 1.0f; }",
                "returning a pointer",
            ),
            (
                "__global__ void k(float* y) { y[0] = __brev(3u); }",
                "`__brev`",
            ),
            (
                "__global__ void k(float* y) { y[0] = __nv_fast_thing(1.0f); }",
                "a CUDA intrinsic the translator does not know",
            ),
            (
                "__global__ void k(float* y) { std::swap(y[0], y[1]); }",
                "`::`",
            ),
            (
                "__device__ void f(float* p) { __shared__ float s[4]; p[0] = s[0]; }\n__global__ void k(float* y) { f(y); }",
                "`__shared__` inside a `__device__` function",
            ),
        ] {
            let message = refused(src);
            assert!(message.contains(says), "{src}\n-> {message}");
        }
    }

    #[test]
    fn a_parameter_given_two_spaces_is_refused() {
        let message = refused(
            "__device__ float first(const float* p) { return p[0]; }\n\
             __global__ void k(const float* x, float* y) {\n__shared__ float s[8];\n\
             y[0] = first(x);\ny[1] = first(s); }",
        );
        assert!(
            message.contains("first's parameter `p`")
                && message.contains("global")
                && message.contains("local"),
            "{message}"
        );
    }

    #[test]
    fn a_pointer_whose_memory_cannot_be_told_is_refused() {
        let message = refused("__global__ void k(float* y) { float* p; y[0] = 1.0f; }");
        assert!(
            message.contains("`p`") && message.contains("address space"),
            "{message}"
        );
    }
}

//! One walk over one function's body ([`Pass`]): its local declarations,
//! casts, calls and atomics, the address space of each pointer, and the
//! edits that qualify them.

use std::collections::{BTreeSet, HashMap};

use super::names::{INT_ATOMICS, QUALIFIERS};
use super::{Space, Sym, Translator, merge};
use crate::TranslateError;
use crate::lex::Kind;

/// One name of a local declaration.
struct Declarator {
    name: String,
    pointer: bool,
    array: bool,
    /// The initializer's positions.
    init: Option<(usize, usize)>,
    name_pos: usize,
}

pub(super) enum Edit {
    Prefix(&'static str),
    Replace(String),
}

/// One walk over one function's body.
pub(super) struct Pass<'a> {
    t: &'a Translator,
    f: usize,
    apply: bool,
    syms: HashMap<String, Sym>,
    /// (callee, parameter) -> the space a call passes, and its line.
    pub(super) calls: HashMap<(usize, usize), (Space, u32)>,
    pub(super) edits: Vec<(usize, Edit)>,
    pub(super) pieces: BTreeSet<&'static str>,
}

impl<'a> Pass<'a> {
    pub(super) fn new(
        t: &'a Translator,
        f: usize,
        spaces: &HashMap<(usize, usize), (Space, u32)>,
        apply: bool,
    ) -> Self {
        let mut syms = t.constants.clone();
        let func = &t.functions[f];
        let mut edits = Vec::new();
        for (k, param) in func.params.iter().enumerate() {
            let space = if !param.pointer {
                Space::Private
            } else if func.kernel {
                Space::Global
            } else {
                match spaces.get(&(f, k)) {
                    Some((s, _)) => *s,
                    // Never called: global, the likely intent.
                    None if apply => Space::Global,
                    None => Space::Unknown,
                }
            };
            if param.pointer {
                edits.push((param.first_tok, Edit::Prefix(space.qualifier())));
            }
            syms.insert(
                param.name.clone(),
                Sym {
                    space,
                    indirect: param.pointer,
                    elem: param.elem.clone(),
                },
            );
        }
        Pass {
            t,
            f,
            apply,
            syms,
            calls: HashMap::new(),
            edits,
            pieces: BTreeSet::new(),
        }
    }

    fn text(&self, p: usize) -> &'a str {
        self.t.text(p)
    }

    fn tok(&self, p: usize) -> usize {
        self.t.code[p]
    }

    pub(super) fn run(&mut self) -> Result<(), TranslateError> {
        let (open, close) = self.t.functions[self.f].body;
        let mut p = open + 1;
        while p < close {
            if self.declaration_starts(p, open) {
                self.declaration(p, close)?;
            }
            match self.text(p) {
                "(" => self.maybe_cast(p)?,
                "static_cast" | "reinterpret_cast" => self.cpp_cast(p)?,
                word if self.t.c(p).kind == Kind::Ident && self.text(p + 1) == "(" => {
                    let callees: Vec<usize> = (0..self.t.functions.len())
                        .filter(|&f| self.t.functions[f].name == word)
                        .collect();
                    for &callee in &callees {
                        self.call(p, callee)?;
                    }
                    if callees.is_empty() && word.starts_with("atomic") {
                        self.atomic(p)?;
                    }
                }
                _ => {}
            }
            p += 1;
        }
        Ok(())
    }

    fn declaration_starts(&self, p: usize, open: usize) -> bool {
        let w = self.text(p);
        if !(self.t.is_type_word(w) || QUALIFIERS.contains(&w)) {
            return false;
        }
        p == open + 1
            || matches!(self.text(p - 1), "{" | "}" | ";")
            || (self.text(p - 1) == "(" && p >= 2 && self.text(p - 2) == "for")
    }

    /// A local declaration at `p`: record its names; qualify pointers.
    fn declaration(&mut self, p: usize, limit: usize) -> Result<(), TranslateError> {
        let Some((q, shared, elem)) = self.specifiers(p, limit) else {
            return Ok(());
        };
        let Some(declared) = self.declarators(q, limit)? else {
            return Ok(());
        };
        if shared && !self.t.functions[self.f].kernel {
            return Err(self.t.unsupported(
                self.tok(p),
                "`__shared__` inside a `__device__` function",
                "OpenCL allows __local variables only at kernel scope",
            ));
        }
        let qualifier = self.declare(&declared, shared, &elem)?;
        self.qualify_declaration(p, qualifier, &declared)
    }

    /// The specifiers of a declaration at `p`: where its declarators
    /// start, whether it is `__shared__`, and the element type's words.
    /// `None` where no type word is among them (no declaration).
    fn specifiers(&self, p: usize, limit: usize) -> Option<(usize, bool, String)> {
        let mut q = p;
        let mut shared = false;
        let mut elem = Vec::new();
        let mut saw_type = false;
        while q < limit {
            let w = self.text(q);
            if w == "__shared__" {
                shared = true;
            } else if w == "struct" {
                q += 1;
                elem.push(self.text(q));
                saw_type = true;
            } else if self.t.is_type_word(w) || matches!(w, "unsigned" | "signed") {
                elem.push(w);
                saw_type = true;
            } else if !QUALIFIERS.contains(&w) {
                break;
            }
            q += 1;
        }
        if !saw_type {
            return None;
        }
        Some((q, shared, elem.join(" ")))
    }

    /// The declarators from `q` to the `;`: `*`s, a name, `[..]`s, an
    /// optional initializer. `None` where what follows is not a list of
    /// them.
    fn declarators(
        &self,
        mut q: usize,
        limit: usize,
    ) -> Result<Option<Vec<Declarator>>, TranslateError> {
        let mut declared: Vec<Declarator> = Vec::new();
        loop {
            let mut pointer = false;
            while matches!(
                self.text(q),
                "*" | "const" | "volatile" | "__restrict__" | "restrict"
            ) {
                pointer |= self.text(q) == "*";
                q += 1;
            }
            if self.t.c(q).kind != Kind::Ident {
                return Ok(None);
            }
            let name_pos = q;
            q += 1;
            let mut array = false;
            while self.text(q) == "[" {
                array = true;
                q = self.t.close_of(q)? + 1;
            }
            let mut init = None;
            if self.text(q) == "=" {
                let from = q + 1;
                q = self.initializer_end(q, limit);
                init = Some((from, q));
            }
            declared.push(Declarator {
                name: self.text(name_pos).to_string(),
                pointer,
                array,
                init,
                name_pos,
            });
            match self.text(q) {
                "," => q += 1,
                ";" => break,
                _ => return Ok(None),
            }
        }
        Ok(Some(declared))
    }

    /// Where the initializer after the `=` at `q` ends: the first `,` or
    /// `;` outside brackets, or `limit`.
    fn initializer_end(&self, mut q: usize, limit: usize) -> usize {
        let mut depth = 0;
        while q < limit {
            match self.text(q) {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                "," | ";" if depth == 0 => break,
                _ => {}
            }
            q += 1;
        }
        q
    }

    /// Record the declared names: `__shared__` ones are local, pointers
    /// take the space of what they are given, values are private. Returns
    /// the space the declaration's pointers share, if it has any.
    fn declare(
        &mut self,
        declared: &[Declarator],
        shared: bool,
        elem: &str,
    ) -> Result<Option<Space>, TranslateError> {
        let mut qualifier: Option<Space> = None;
        for d in declared {
            let space = if shared {
                Space::Local
            } else if d.pointer {
                let space = self.pointer_space(d)?;
                match qualifier {
                    Some(s) if s != space && self.apply => {
                        return Err(TranslateError::MixedSpaces {
                            line: self.t.c(d.name_pos).line,
                            name: format!("the declaration of `{}`", d.name),
                            first: s.name(),
                            second: space.name(),
                        });
                    }
                    _ => qualifier = Some(space),
                }
                space
            } else {
                Space::Private
            };
            self.syms.insert(
                d.name.clone(),
                Sym {
                    space,
                    indirect: d.pointer || d.array,
                    elem: elem.to_string(),
                },
            );
        }
        Ok(qualifier)
    }

    /// A declared pointer's space: its initializer's, else that of the
    /// first assignment after. Not knowing is an error in the pass that
    /// applies its edits, and unknown before.
    fn pointer_space(&self, d: &Declarator) -> Result<Space, TranslateError> {
        let space = match d.init {
            Some((a, b)) => self.space_of(a, b)?,
            None => self.assigned_later(&d.name, d.name_pos)?,
        };
        match space {
            Some(s) => Ok(s),
            None if self.apply => Err(TranslateError::UnknownSpace {
                line: self.t.c(d.name_pos).line,
                name: d.name.clone(),
                why: "its value names no pointer or array".into(),
            }),
            None => Ok(Space::Unknown),
        }
    }

    /// Put the pointers' address space before the declaration at `p`;
    /// values cannot share a declaration with pointers that need one.
    fn qualify_declaration(
        &mut self,
        p: usize,
        qualifier: Option<Space>,
        declared: &[Declarator],
    ) -> Result<(), TranslateError> {
        if let Some(space) = qualifier
            && space.qualifier() != ""
        {
            if declared.iter().any(|d| !d.pointer) && self.apply {
                return Err(self.t.unsupported(
                    self.tok(p),
                    "pointers and values in one declaration",
                    "the pointers need an address space the values cannot take; declare them apart",
                ));
            }
            self.edits
                .push((self.tok(p), Edit::Prefix(space.qualifier())));
        }
        Ok(())
    }

    /// The space of the first `name = ...;` after a declaration without
    /// an initializer.
    fn assigned_later(&self, name: &str, from: usize) -> Result<Option<Space>, TranslateError> {
        let (_, close) = self.t.functions[self.f].body;
        for p in from + 1..close {
            if self.text(p) == name && self.text(p + 1) == "=" {
                let end = (p + 2..close)
                    .find(|&q| self.text(q) == ";")
                    .unwrap_or(close);
                return self.space_of(p + 2, end);
            }
        }
        Ok(None)
    }

    /// The address space positions `[from, to)` point into: that of the
    /// pointers and arrays they name (`&x` of a value is private). None if
    /// they name none.
    fn space_of(&self, from: usize, to: usize) -> Result<Option<Space>, TranslateError> {
        let mut found: Option<(Space, usize)> = None;
        for p in from..to {
            if self.t.c(p).kind != Kind::Ident
                || (p > 0 && matches!(self.text(p - 1), "." | "->"))
                || self.text(p + 1) == "("
            {
                continue;
            }
            let Some(sym) = self.syms.get(self.text(p)) else {
                continue;
            };
            let space = if sym.indirect {
                sym.space
            } else if p > from && self.text(p - 1) == "&" {
                Space::Private
            } else {
                continue;
            };
            match found {
                Some((s, _)) if s == Space::Unknown || space == Space::Unknown => {
                    found = Some((Space::Unknown, p));
                }
                Some((s, at)) if s != space => {
                    return Err(TranslateError::MixedSpaces {
                        line: self.t.c(p).line,
                        name: format!(
                            "the expression with `{}` and `{}`",
                            self.text(at),
                            self.text(p)
                        ),
                        first: s.name(),
                        second: space.name(),
                    });
                }
                _ => found = Some((space, p)),
            }
        }
        Ok(found.map(|(s, _)| s))
    }

    /// The operand after a cast ending at position `close`: positions
    /// `[close + 1, end)`.
    fn operand_end(&self, close: usize) -> Result<usize, TranslateError> {
        let mut p = close + 1;
        while matches!(self.text(p), "&" | "*" | "-" | "+" | "!" | "~") {
            p += 1;
        }
        if self.text(p) == "(" {
            p = self.t.close_of(p)? + 1;
        } else {
            p += 1;
        }
        loop {
            match self.text(p) {
                "[" | "(" => p = self.t.close_of(p)? + 1,
                "." | "->" => p += 2,
                _ => return Ok(p),
            }
        }
    }

    /// `(T*)x`: the cast takes `x`'s address space.
    fn maybe_cast(&mut self, open: usize) -> Result<(), TranslateError> {
        let mut p = open + 1;
        let mut saw_type = false;
        while self.text(p) != ")" {
            let w = self.text(p);
            if self.t.is_type_word(w) || matches!(w, "unsigned" | "signed" | "struct") {
                saw_type = true;
            } else if !matches!(w, "const" | "volatile" | "*") {
                return Ok(());
            }
            p += 1;
        }
        let close = p;
        if !saw_type || self.text(close - 1) != "*" {
            return Ok(());
        }
        let end = self.operand_end(close)?;
        self.qualify_cast(open, open + 1, (close + 1, end))
    }

    /// Qualify the cast type starting at position `ty` with the space of
    /// the operand `[from, to)`.
    fn qualify_cast(
        &mut self,
        at: usize,
        ty: usize,
        (from, to): (usize, usize),
    ) -> Result<(), TranslateError> {
        let space = match self.space_of(from, to)? {
            Some(s) => s,
            None if self.apply => {
                return Err(TranslateError::UnknownSpace {
                    line: self.t.c(at).line,
                    name: "a pointer cast".into(),
                    why: "what it casts names no pointer or array".into(),
                });
            }
            None => Space::Unknown,
        };
        self.edits
            .push((self.tok(ty), Edit::Prefix(space.qualifier())));
        Ok(())
    }

    /// `reinterpret_cast<T*>(x)`: like `(T*)x`.
    fn cpp_cast(&mut self, kw: usize) -> Result<(), TranslateError> {
        let Some(gt) = (kw + 2..self.t.code.len()).find(|&p| self.text(p) == ">") else {
            return Ok(());
        };
        if self.text(gt - 1) != "*" || self.text(gt + 1) != "(" {
            return Ok(());
        }
        let close = self.t.close_of(gt + 1)?;
        self.qualify_cast(kw, kw + 2, (gt + 2, close))
    }

    /// The arguments of the call whose `(` is at `open`: position ranges.
    fn arguments(&self, open: usize) -> Result<Vec<(usize, usize)>, TranslateError> {
        let close = self.t.close_of(open)?;
        let mut args = Vec::new();
        let mut from = open + 1;
        let mut depth = 0;
        for p in open + 1..close {
            match self.text(p) {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                "," if depth == 0 => {
                    args.push((from, p));
                    from = p + 1;
                }
                _ => {}
            }
        }
        if from < close {
            args.push((from, close));
        }
        Ok(args)
    }

    fn call(&mut self, name: usize, callee: usize) -> Result<(), TranslateError> {
        let args = self.arguments(name + 1)?;
        let line = self.t.c(name).line;
        for (k, (a, b)) in args.into_iter().enumerate() {
            let Some(param) = self.t.functions[callee].params.get(k) else {
                break;
            };
            if !param.pointer {
                continue;
            }
            let space = match self.space_of(a, b)? {
                Some(s) => s,
                None if self.apply => {
                    return Err(TranslateError::UnknownSpace {
                        line,
                        name: format!("argument {} of `{}`", k + 1, self.text(name)),
                        why: "it names no pointer or array".into(),
                    });
                }
                None => Space::Unknown,
            };
            merge(&mut self.calls, (callee, k), space, line, &self.t.functions)?;
        }
        Ok(())
    }

    fn atomic(&mut self, name: usize) -> Result<(), TranslateError> {
        let word = self.text(name);
        let Some((_, int_name)) = INT_ATOMICS.iter().find(|(c, _)| *c == word) else {
            return Err(self.t.unsupported(
                self.tok(name),
                &format!("`{word}`"),
                "an atomic the translator does not know",
            ));
        };
        let args = self.arguments(name + 1)?;
        let Some(&(a, b)) = args.first() else {
            return Ok(());
        };
        // The element type: a cast's, else the named pointer's.
        let elem = if self.text(a) == "(" && self.t.is_type_word(self.text(a + 1)) {
            (a + 1..b)
                .take_while(|&p| self.text(p) != ")")
                .map(|p| self.text(p))
                .filter(|w| self.t.is_type_word(w) || matches!(*w, "unsigned" | "signed"))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            (a..b)
                .filter(|&p| self.t.c(p).kind == Kind::Ident)
                .find_map(|p| self.syms.get(self.text(p)).filter(|s| s.indirect))
                .map(|s| s.elem.clone())
                .unwrap_or_default()
        };
        let space = self.space_of(a, b)?.unwrap_or(Space::Unknown);
        let replacement = match elem.as_str() {
            "int" | "unsigned int" | "unsigned" | "uint" | "int32_t" | "uint32_t"
            | "signed int" => int_name.to_string(),
            "float" if word == "atomicExch" => "atomic_xchg".into(),
            "float" if word == "atomicAdd" => {
                self.pieces.insert("atomic_add_float");
                match space {
                    Space::Local => "kevo_atomic_add_float_local".into(),
                    _ => "kevo_atomic_add_float_global".into(),
                }
            }
            "" if self.apply => {
                return Err(TranslateError::UnknownSpace {
                    line: self.t.c(name).line,
                    name: format!("the first argument of `{word}`"),
                    why: "its element type is needed to pick the OpenCL atomic".into(),
                });
            }
            "" => return Ok(()),
            other => {
                return Err(self.t.unsupported(
                    self.tok(name),
                    &format!("`{word}` on {other}"),
                    "OpenCL C 1.2 has 32-bit integer atomics (and exchange on float) only",
                ));
            }
        };
        self.edits
            .push((self.tok(name), Edit::Replace(replacement)));
        Ok(())
    }
}

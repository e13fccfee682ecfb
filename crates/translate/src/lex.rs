//! A lossless lexer: every byte of the source lands in exactly one token,
//! so the translation can rewrite a few tokens and print the rest as the
//! author wrote them (comments, layout and `// kevo: block` lines kept, and
//! every line keeps its number, so compiler messages point at the CUDA
//! source).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Ident,
    Number,
    /// A string or character literal.
    Literal,
    Punct,
    /// Whitespace, comments and line continuations.
    Trivia,
    /// A preprocessor line kept whole (`#pragma`, `#if`, ...), or the
    /// `#define NAME(params)` head of a macro whose body is lexed.
    Directive,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tok {
    pub kind: Kind,
    pub text: String,
    /// 1-based line the token starts on.
    pub line: u32,
    /// Part of a `#define` body: rewritten like code, but not part of the
    /// program's structure (braces, declarations).
    pub in_macro: bool,
}

impl Tok {
    pub fn is(&self, s: &str) -> bool {
        self.kind != Kind::Trivia && self.text == s
    }
    pub fn is_code(&self) -> bool {
        !matches!(self.kind, Kind::Trivia | Kind::Directive)
    }
}

/// Multi-character operators, longest first.
const OPERATORS: [&str; 23] = [
    "<<=", ">>=", "...", "->", "::", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
];

pub fn lex(source: &str) -> Vec<Tok> {
    let chars: Vec<char> = source.chars().collect();
    let mut lexer = Lexer {
        chars: &chars,
        at: 0,
        line: 1,
        toks: Vec::new(),
    };
    lexer.run();
    lexer.toks
}

struct Lexer<'a> {
    chars: &'a [char],
    at: usize,
    line: u32,
    toks: Vec<Tok>,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn push(&mut self, kind: Kind, start: usize, in_macro: bool) {
        let text: String = self.chars[start..self.at].iter().collect();
        let line = self.line;
        self.line += text.matches('\n').count() as u32;
        self.toks.push(Tok {
            kind,
            text,
            line,
            in_macro,
        });
    }

    /// Only whitespace since the last newline (or the start).
    fn at_line_start(&self) -> bool {
        self.chars[..self.at]
            .iter()
            .rev()
            .take_while(|c| **c != '\n')
            .all(|c| c.is_whitespace())
    }

    fn run(&mut self) {
        while self.at < self.chars.len() {
            if self.peek(0) == Some('#') && self.at_line_start() {
                self.directive();
            } else {
                self.token(false);
            }
        }
    }

    /// One token; in a macro body a newline that is not continued ends
    /// the body and returns false.
    fn token(&mut self, in_macro: bool) -> bool {
        let start = self.at;
        let c = self.chars[self.at];
        let next = self.peek(1);
        if c == '\\' && next == Some('\n') {
            self.at += 2;
            self.push(Kind::Trivia, start, in_macro);
        } else if c == '\n' && in_macro {
            return false;
        } else if c.is_whitespace() {
            while let Some(w) = self.peek(0)
                && w.is_whitespace()
                && !(in_macro && w == '\n')
            {
                self.at += 1;
            }
            self.push(Kind::Trivia, start, in_macro);
        } else if c == '/' && next == Some('/') {
            while let Some(w) = self.peek(0)
                && w != '\n'
            {
                self.at += 1;
            }
            self.push(Kind::Trivia, start, in_macro);
        } else if c == '/' && next == Some('*') {
            self.at += 2;
            while self.at < self.chars.len()
                && !(self.peek(0) == Some('*') && self.peek(1) == Some('/'))
            {
                self.at += 1;
            }
            self.at = (self.at + 2).min(self.chars.len());
            self.push(Kind::Trivia, start, in_macro);
        } else if c == '"' || c == '\'' {
            self.at += 1;
            while let Some(w) = self.peek(0)
                && w != c
                && w != '\n'
            {
                self.at += if w == '\\' { 2 } else { 1 };
            }
            self.at = (self.at + 1).min(self.chars.len());
            self.push(Kind::Literal, start, in_macro);
        } else if c.is_ascii_alphabetic() || c == '_' {
            while let Some(w) = self.peek(0)
                && (w.is_ascii_alphanumeric() || w == '_')
            {
                self.at += 1;
            }
            self.push(Kind::Ident, start, in_macro);
        } else if c.is_ascii_digit() || (c == '.' && next.is_some_and(|n| n.is_ascii_digit())) {
            while let Some(w) = self.peek(0)
                && (w.is_ascii_alphanumeric()
                    || w == '.'
                    || ((w == '+' || w == '-')
                        && matches!(self.chars[self.at - 1], 'e' | 'E' | 'p' | 'P')
                        && !self.chars[start..self.at].starts_with(&['0', 'x'])))
            {
                self.at += 1;
            }
            self.push(Kind::Number, start, in_macro);
        } else {
            let rest: String = self.chars[self.at..self.chars.len().min(self.at + 3)]
                .iter()
                .collect();
            let len = OPERATORS
                .iter()
                .find(|op| rest.starts_with(**op))
                .map_or(1, |op| op.len());
            self.at += len;
            self.push(Kind::Punct, start, in_macro);
        }
        true
    }

    /// A preprocessor line. `#define` keeps its head as one directive
    /// token and lexes the body; any other directive is one token.
    fn directive(&mut self) {
        let start = self.at;
        self.at += 1;
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.at += 1;
        }
        let name_start = self.at;
        while self.peek(0).is_some_and(|c| c.is_ascii_alphabetic()) {
            self.at += 1;
        }
        let name: String = self.chars[name_start..self.at].iter().collect();
        if name == "define" {
            while matches!(self.peek(0), Some(' ' | '\t')) {
                self.at += 1;
            }
            while self
                .peek(0)
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                self.at += 1;
            }
            if self.peek(0) == Some('(') {
                while let Some(c) = self.peek(0)
                    && c != ')'
                    && c != '\n'
                {
                    self.at += 1;
                }
                if self.peek(0) == Some(')') {
                    self.at += 1;
                }
            }
            self.push(Kind::Directive, start, false);
            while self.at < self.chars.len() && self.token(true) {}
        } else {
            while let Some(c) = self.peek(0) {
                if c == '\\' && self.peek(1) == Some('\n') {
                    self.at += 2;
                } else if c == '\n' {
                    break;
                } else {
                    self.at += 1;
                }
            }
            self.push(Kind::Directive, start, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_lands_in_one_token_and_lines_are_counted() {
        let src = "#define SQ(x) ((x) * \\\n (x))\n// c\n__global__ void k(float* a) {\n  a[0] = 1.5e-3f; /* b\n */ a[1] = 'c';\n}\n#pragma unroll\n";
        let toks = lex(src);
        assert_eq!(
            toks.iter().map(|t| t.text.as_str()).collect::<String>(),
            src
        );
        let body_x = toks.iter().filter(|t| t.in_macro && t.is("x")).count();
        assert_eq!(body_x, 2, "the macro body is lexed: {toks:?}");
        let a1 = toks.iter().rposition(|t| t.is("a")).unwrap();
        assert_eq!(toks[a1].line, 6);
        assert!(
            toks.iter()
                .any(|t| t.kind == Kind::Number && t.text == "1.5e-3f")
        );
        assert!(
            toks.iter()
                .any(|t| t.kind == Kind::Directive && t.text == "#pragma unroll")
        );
        assert!(!toks.iter().any(|t| t.is("__global__") && t.in_macro));
    }
}

//! Source text to tokens the patterns can match without being fooled:
//! comments and string literals removed (their text kept apart, for the
//! inline assembly some patterns look into), preprocessor lines dropped
//! after their `#define`s are recorded, and macro uses expanded so that
//! `#define SYNC __syncthreads()` counts where `SYNC` is used, not where
//! it is defined.

use std::collections::HashMap;

/// One token with the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub text: String,
    pub line: u32,
}

impl Token {
    pub fn is(&self, s: &str) -> bool {
        self.text == s
    }
    pub fn is_ident(&self) -> bool {
        self.text
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    }
}

/// A source after lexing: its code tokens (macros expanded) and the
/// contents of its string literals (inline assembly).
#[derive(Debug, Clone, Default)]
pub struct Lexed {
    pub tokens: Vec<Token>,
    pub strings: Vec<String>,
}

/// Multi-character operators the patterns distinguish, longest first.
const OPERATORS: [&str; 22] = [
    "<<=", ">>=", "->", "::", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=",
    "-=", "*=", "/=", "%=", "&=", "|=", "^=",
];

/// How deep macro expansion goes: a macro that expands to itself (or a
/// cycle) stops here instead of looping.
const MAX_EXPANSION_DEPTH: usize = 8;

struct Macro {
    params: Option<Vec<String>>,
    body: Vec<Token>,
}

pub fn lex(source: &str) -> Lexed {
    let (code, strings) = strip_comments_and_strings(source);
    let mut macros = HashMap::new();
    let mut tokens = Vec::new();
    // Join continued lines of directives; other lines are tokenised as
    // they are.
    let lines: Vec<&str> = code.split('\n').collect();
    let mut i = 0;
    while i < lines.len() {
        let line_no = i as u32 + 1;
        let mut line = lines[i].to_string();
        if line.trim_start().starts_with('#') {
            while line.ends_with('\\') && i + 1 < lines.len() {
                line.pop();
                i += 1;
                line.push(' ');
                line.push_str(lines[i]);
            }
            if let Some((name, m)) = parse_define(&line, line_no) {
                macros.insert(name, m);
            }
        } else {
            tokens.extend(tokenize(&line, line_no));
        }
        i += 1;
    }
    Lexed {
        tokens: expand(&tokens, &macros, 0),
        strings,
    }
}

/// `source` with comments removed and every run of whitespace between
/// tokens made one space (string literals kept): two sources that differ
/// only there are the same kernel.
pub fn normalised(source: &str) -> String {
    let (code, _) = strip_comments(source, false);
    let mut out = String::with_capacity(code.len());
    for line in code.split('\n') {
        for t in tokenize(line, 0) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&t.text);
        }
    }
    out
}

/// Replace comments by spaces (newlines kept, so lines still count) and
/// string and character literals by `""`, returning the strings' text.
fn strip_comments_and_strings(source: &str) -> (String, Vec<String>) {
    strip_comments(source, true)
}

/// Comments replaced by spaces; with `strip_strings`, string and character
/// literals too (their text returned).
fn strip_comments(source: &str, strip_strings: bool) -> (String, Vec<String>) {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut strings = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                // A line comment continued with a backslash goes on.
                if chars[i] == '\\' && chars.get(i + 1) == Some(&'\n') {
                    out.push('\n');
                    i += 1;
                }
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
            out.push(' ');
        } else if strip_strings && (c == '"' || c == '\'') {
            let mut text = String::new();
            i += 1;
            while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    text.push(chars[i + 1]);
                    i += 2;
                    continue;
                }
                text.push(chars[i]);
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            if c == '"' {
                strings.push(text);
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    (out, strings)
}

fn tokenize(line: &str, line_no: u32) -> Vec<Token> {
    let chars: Vec<char> = line.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '.'
                    || ((chars[i] == '+' || chars[i] == '-')
                        && matches!(chars[i - 1], 'e' | 'E' | 'p' | 'P')))
            {
                i += 1;
            }
        } else if c == '"' && chars.get(i + 1) == Some(&'"') {
            // A string literal's placeholder.
            i += 2;
        } else {
            let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
            let op = OPERATORS.iter().find(|op| rest.starts_with(**op));
            i += op.map_or(1, |op| op.len());
        }
        tokens.push(Token {
            text: chars[start..i].iter().collect(),
            line: line_no,
        });
    }
    tokens
}

/// `#define NAME body` or `#define NAME(a, b) body`.
fn parse_define(line: &str, line_no: u32) -> Option<(String, Macro)> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("define")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    let name_end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = rest[..name_end].to_string();
    if name.is_empty() {
        return None;
    }
    let after = &rest[name_end..];
    // A parenthesis right after the name makes a function-like macro.
    let (params, body) = match after.strip_prefix('(') {
        Some(p) => {
            let close = p.find(')')?;
            let params = p[..close]
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            (Some(params), &p[close + 1..])
        }
        None => (None, after),
    };
    Some((
        name,
        Macro {
            params,
            body: tokenize(body, line_no),
        },
    ))
}

fn expand(tokens: &[Token], macros: &HashMap<String, Macro>, depth: usize) -> Vec<Token> {
    if depth >= MAX_EXPANSION_DEPTH || macros.is_empty() {
        return tokens.to_vec();
    }
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let Some(m) = macros.get(&t.text) else {
            out.push(t.clone());
            i += 1;
            continue;
        };
        // Expanded tokens take the line of the use.
        let at_use = |body: &[Token]| -> Vec<Token> {
            body.iter()
                .map(|b| Token {
                    text: b.text.clone(),
                    line: t.line,
                })
                .collect()
        };
        match &m.params {
            None => {
                out.extend(expand(&at_use(&m.body), macros, depth + 1));
                i += 1;
            }
            Some(params) => {
                // A function-like macro's name without arguments is left
                // as it is.
                if !tokens.get(i + 1).is_some_and(|n| n.is("(")) {
                    out.push(t.clone());
                    i += 1;
                    continue;
                }
                let (args, end) = arguments(tokens, i + 1);
                let mut body = Vec::new();
                for b in at_use(&m.body) {
                    match params.iter().position(|p| *p == b.text) {
                        Some(k) => body.extend(args.get(k).cloned().unwrap_or_default()),
                        None if b.is("#") || b.is("##") => {}
                        None => body.push(b),
                    }
                }
                out.extend(expand(&body, macros, depth + 1));
                i = end;
            }
        }
    }
    out
}

/// The comma-separated arguments of a call whose `(` is at `open`, and the
/// index after its `)`.
fn arguments(tokens: &[Token], open: usize) -> (Vec<Vec<Token>>, usize) {
    let mut args = vec![Vec::new()];
    let mut depth = 0;
    let mut i = open;
    while i < tokens.len() {
        let t = &tokens[i];
        match t.text.as_str() {
            "(" => {
                depth += 1;
                if depth > 1 {
                    args.last_mut().expect("one list").push(t.clone());
                }
            }
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return (args, i + 1);
                }
                args.last_mut().expect("one list").push(t.clone());
            }
            "," if depth == 1 => args.push(Vec::new()),
            _ => args.last_mut().expect("one list").push(t.clone()),
        }
        i += 1;
    }
    (args, tokens.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(source: &str) -> Vec<String> {
        lex(source).tokens.into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn comments_and_strings_are_not_code() {
        let l = lex(
            "a // __syncthreads();\n/* barrier(CLK_LOCAL_MEM_FENCE); */ b\nasm(\"cp.async.ca.shared.global\");",
        );
        let t: Vec<&str> = l.tokens.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(t, ["a", "b", "asm", "(", "\"\"", ")", ";"]);
        assert_eq!(l.strings, ["cp.async.ca.shared.global"]);
        assert_eq!(l.tokens[1].line, 2);
    }

    #[test]
    fn macros_expand_where_used_not_where_defined() {
        assert_eq!(
            texts(
                "#define SYNC __syncthreads()\n#define LOAD(p, i) p[i]\nSYNC; x = LOAD(a, k + 1);"
            ),
            [
                "__syncthreads",
                "(",
                ")",
                ";",
                "x",
                "=",
                "a",
                "[",
                "k",
                "+",
                "1",
                "]",
                ";"
            ]
        );
        // A macro that names itself stops expanding.
        assert_eq!(
            texts("#define X X + 1\nX").len(),
            1 + 2 * MAX_EXPANSION_DEPTH
        );
    }

    #[test]
    fn normalised_sources_differ_only_in_code() {
        let a = "// saxpy\n__kernel void k(float* y) {\n    y[0] = 1.0f;   /* one */\n}\n";
        let b = "__kernel   void k(float*y){ y[0]=1.0f; }";
        assert_eq!(normalised(a), normalised(b));
        assert_ne!(
            normalised(a),
            normalised("__kernel void k(float* y) { y[0] = 2.0f; }")
        );
        assert_ne!(
            normalised("printf(\"a b\");"),
            normalised("printf(\"ab\");"),
            "string contents are code"
        );
    }

    #[test]
    fn continued_directives_and_operators() {
        assert_eq!(
            texts("#define STEP \\\n  s >>= 1\nfor (;;) STEP; a->b"),
            [
                "for", "(", ";", ";", ")", "s", ">>=", "1", ";", "a", "->", "b"
            ]
        );
        assert_eq!(texts("x = 1.5e-3f;"), ["x", "=", "1.5e-3f", ";"]);
    }
}

//! Arithmetic over a task's size dimensions, for work models written as
//! data (`work = "8 * NX * NY * n_steps"`): numbers, dimension names,
//! `+ - * /`, unary minus and parentheses, evaluated in f64. Parsed once,
//! when the task is loaded, so a typo is an error naming the task and not
//! a wrong score.

/// A parsed expression; names are resolved to dimension indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    text: String,
    node: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Number(f64),
    Dim(usize),
    Neg(Box<Node>),
    Binary(Box<Node>, char, Box<Node>),
}

pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Expr {
    /// Parse `text` over the dimension names `dims`.
    pub fn parse(text: &str, dims: &[&str]) -> Result<Expr, String> {
        let tokens = tokenize(text)?;
        let mut parser = Parser {
            tokens: &tokens,
            at: 0,
            dims,
        };
        let node = parser.sum()?;
        if let Some(t) = tokens.get(parser.at) {
            return Err(format!("unexpected `{t}` in `{text}`"));
        }
        Ok(Expr {
            text: text.to_string(),
            node,
        })
    }

    /// The value for dimension values `dims` (in the order parsed with).
    pub fn eval(&self, dims: &[f64]) -> f64 {
        fn go(n: &Node, dims: &[f64]) -> f64 {
            match n {
                Node::Number(v) => *v,
                Node::Dim(i) => dims.get(*i).copied().unwrap_or(f64::NAN),
                Node::Neg(a) => -go(a, dims),
                Node::Binary(a, op, b) => {
                    let (a, b) = (go(a, dims), go(b, dims));
                    match op {
                        '+' => a + b,
                        '-' => a - b,
                        '*' => a * b,
                        _ => a / b,
                    }
                }
            }
        }
        go(&self.node, dims)
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(f64),
    Name(String),
    Symbol(char),
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Number(v) => write!(f, "{v}"),
            Token::Name(n) => f.write_str(n),
            Token::Symbol(c) => write!(f, "{c}"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || chars[i] == '.'
                    || chars[i] == '_'
                    || chars[i] == 'e'
                    || ((chars[i] == '-' || chars[i] == '+') && chars[i - 1] == 'e'))
            {
                i += 1;
            }
            let s: String = chars[start..i].iter().filter(|&&c| c != '_').collect();
            let v = s
                .parse::<f64>()
                .map_err(|_| format!("`{s}` is not a number in `{text}`"))?;
            tokens.push(Token::Number(v));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Name(chars[start..i].iter().collect()));
        } else if "+-*/()".contains(c) {
            tokens.push(Token::Symbol(c));
            i += 1;
        } else {
            return Err(format!("unexpected `{c}` in `{text}`"));
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    dims: &'a [&'a str],
}

impl Parser<'_> {
    fn peek_symbol(&self, symbols: &str) -> Option<char> {
        match self.tokens.get(self.at) {
            Some(Token::Symbol(c)) if symbols.contains(*c) => Some(*c),
            _ => None,
        }
    }

    fn sum(&mut self) -> Result<Node, String> {
        let mut left = self.product()?;
        while let Some(op) = self.peek_symbol("+-") {
            self.at += 1;
            left = Node::Binary(Box::new(left), op, Box::new(self.product()?));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Node, String> {
        let mut left = self.unary()?;
        while let Some(op) = self.peek_symbol("*/") {
            self.at += 1;
            left = Node::Binary(Box::new(left), op, Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Node, String> {
        if self.peek_symbol("-").is_some() {
            self.at += 1;
            return Ok(Node::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Node, String> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        match token {
            Some(Token::Number(v)) => Ok(Node::Number(v)),
            Some(Token::Name(n)) => self
                .dims
                .iter()
                .position(|d| *d == n)
                .map(Node::Dim)
                .ok_or_else(|| {
                    format!(
                        "unknown name `{n}` (the dimensions are {})",
                        self.dims.join(", ")
                    )
                }),
            Some(Token::Symbol('(')) => {
                let inner = self.sum()?;
                if self.peek_symbol(")").is_none() {
                    return Err("a `(` is not closed".into());
                }
                self.at += 1;
                Ok(inner)
            }
            Some(t) => Err(format!("unexpected `{t}`")),
            None => Err("the expression ends too early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str, dims: &[&str], values: &[f64]) -> f64 {
        Expr::parse(text, dims).unwrap().eval(values)
    }

    #[test]
    fn precedence_parentheses_and_unary_minus() {
        assert_eq!(eval("2 + 3 * 4", &[], &[]), 14.0);
        assert_eq!(eval("(2 + 3) * 4", &[], &[]), 20.0);
        assert_eq!(eval("2 * d * d - d", &["d"], &[8.0]), 120.0);
        assert_eq!(eval("-N / 4 + 1_000", &["N"], &[8.0]), 998.0);
        assert_eq!(eval("1.5e3 * N", &["N"], &[2.0]), 3000.0);
        assert_eq!(
            eval(
                "12 * NX * NY * NZ * n_steps",
                &["NX", "NY", "NZ", "n_steps"],
                &[64.0, 64.0, 64.0, 30.0]
            ),
            94_371_840.0
        );
    }

    #[test]
    fn mistakes_are_named() {
        for (text, needle) in [
            ("8 * Q", "unknown name `Q`"),
            ("8 *", "ends too early"),
            ("(8 * N", "not closed"),
            ("8 N", "unexpected `N`"),
            ("8 ^ N", "unexpected `^`"),
            ("1.2.3", "not a number"),
        ] {
            let err = Expr::parse(text, &["N"]).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}

//! The expressions of `// kevo: require` lines: integer arithmetic over the
//! tuned parameters with comparisons and logic, C's precedence and C's
//! truth (zero is false). Parsed once with the declarations, so a typo or
//! an unknown name is an error naming the line before anything is compiled.

/// A parsed constraint; names are resolved to parameter indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    text: String,
    node: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Number(i64),
    Parameter(usize),
    Not(Box<Node>),
    Neg(Box<Node>),
    Binary(Box<Node>, Op, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// Binary operators by precedence level, loosest first.
const LEVELS: &[&[(&str, Op)]] = &[
    &[("||", Op::Or)],
    &[("&&", Op::And)],
    &[("==", Op::Eq), ("!=", Op::Ne)],
    &[("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)],
    &[("+", Op::Add), ("-", Op::Sub)],
    &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Rem)],
];

impl Constraint {
    /// Parse `text` over the parameter names `names`.
    pub fn parse(text: &str, names: &[&str]) -> Result<Constraint, String> {
        let tokens = tokenize(text)?;
        if tokens.is_empty() {
            return Err("the constraint is empty".into());
        }
        let mut parser = Parser {
            tokens: &tokens,
            at: 0,
            names,
        };
        let node = parser.level(0)?;
        if let Some(t) = tokens.get(parser.at) {
            return Err(format!("unexpected `{t}`"));
        }
        Ok(Constraint {
            text: text.trim().to_string(),
            node,
        })
    }

    /// Whether the parameter values `values` (in declaration order) meet the
    /// constraint. Division or remainder by zero, and overflow, make it false:
    /// a configuration whose constraint cannot be computed is not valid.
    pub fn holds(&self, values: &[i64]) -> bool {
        eval(&self.node, values).is_some_and(|v| v != 0)
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The indices of the parameters the constraint reads.
    pub fn parameters(&self) -> Vec<usize> {
        fn go(n: &Node, out: &mut Vec<usize>) {
            match n {
                Node::Number(_) => {}
                Node::Parameter(i) => {
                    if !out.contains(i) {
                        out.push(*i);
                    }
                }
                Node::Not(a) | Node::Neg(a) => go(a, out),
                Node::Binary(a, _, b) => {
                    go(a, out);
                    go(b, out);
                }
            }
        }
        let mut out = Vec::new();
        go(&self.node, &mut out);
        out
    }
}

fn eval(n: &Node, values: &[i64]) -> Option<i64> {
    Some(match n {
        Node::Number(v) => *v,
        Node::Parameter(i) => *values.get(*i)?,
        Node::Not(a) => i64::from(eval(a, values)? == 0),
        Node::Neg(a) => eval(a, values)?.checked_neg()?,
        Node::Binary(a, op, b) => {
            let a = eval(a, values)?;
            // && and || short-circuit as in C: `B != 0 && A % B == 0` is safe.
            match op {
                Op::Or if a != 0 => return Some(1),
                Op::And if a == 0 => return Some(0),
                _ => {}
            }
            let b = eval(b, values)?;
            match op {
                Op::Or | Op::And => i64::from(b != 0),
                Op::Eq => i64::from(a == b),
                Op::Ne => i64::from(a != b),
                Op::Lt => i64::from(a < b),
                Op::Le => i64::from(a <= b),
                Op::Gt => i64::from(a > b),
                Op::Ge => i64::from(a >= b),
                Op::Add => a.checked_add(b)?,
                Op::Sub => a.checked_sub(b)?,
                Op::Mul => a.checked_mul(b)?,
                Op::Div => a.checked_div(b)?,
                Op::Rem => a.checked_rem(b)?,
            }
        }
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(i64),
    Name(String),
    Symbol(&'static str),
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Number(v) => write!(f, "{v}"),
            Token::Name(n) => f.write_str(n),
            Token::Symbol(s) => f.write_str(s),
        }
    }
}

const SYMBOLS: &[&str] = &[
    "||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "(", ")",
];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if c.is_ascii_digit() {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let digits = &rest[..end];
            let v = crate::space::parse_integer(digits)
                .ok_or_else(|| format!("`{digits}` is not an integer"))?;
            tokens.push(Token::Number(v));
            rest = &rest[end..];
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            tokens.push(Token::Name(rest[..end].to_string()));
            rest = &rest[end..];
        } else if let Some(s) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) {
            tokens.push(Token::Symbol(s));
            rest = &rest[s.len()..];
        } else {
            return Err(format!("unexpected `{c}`"));
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    names: &'a [&'a str],
}

impl Parser<'_> {
    fn symbol(&self) -> Option<&'static str> {
        match self.tokens.get(self.at) {
            Some(Token::Symbol(s)) => Some(s),
            _ => None,
        }
    }

    fn level(&mut self, level: usize) -> Result<Node, String> {
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.level(level + 1)?;
        while let Some(&(_, op)) = self
            .symbol()
            .and_then(|s| ops.iter().find(|(text, _)| *text == s))
        {
            self.at += 1;
            let right = self.level(level + 1)?;
            left = Node::Binary(Box::new(left), op, Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Node, String> {
        match self.symbol() {
            Some("!") => {
                self.at += 1;
                Ok(Node::Not(Box::new(self.unary()?)))
            }
            Some("-") => {
                self.at += 1;
                Ok(Node::Neg(Box::new(self.unary()?)))
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<Node, String> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        match token {
            Some(Token::Number(v)) => Ok(Node::Number(v)),
            Some(Token::Name(n)) => self
                .names
                .iter()
                .position(|p| *p == n)
                .map(Node::Parameter)
                .ok_or_else(|| {
                    if self.names.is_empty() {
                        format!("unknown name `{n}`: no parameter is declared with `// kevo: tune`")
                    } else {
                        format!(
                            "unknown name `{n}` (the tuned parameters are {})",
                            self.names.join(", ")
                        )
                    }
                }),
            Some(Token::Symbol("(")) => {
                let inner = self.level(0)?;
                if self.symbol() != Some(")") {
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

    fn holds(text: &str, names: &[&str], values: &[i64]) -> bool {
        Constraint::parse(text, names).unwrap().holds(values)
    }

    #[test]
    fn arithmetic_comparison_and_logic_follow_c() {
        let n = &["BX", "BY", "TILE", "VEC"];
        assert!(holds("BX * BY <= 1024", n, &[32, 32, 0, 0]));
        assert!(!holds("BX * BY <= 1024", n, &[64, 32, 0, 0]));
        assert!(holds("TILE % VEC == 0", n, &[0, 0, 16, 4]));
        assert!(!holds("TILE % VEC == 0", n, &[0, 0, 16, 3]));
        // Precedence: * before +, + before <, < before ==, == before &&, && before ||.
        assert!(holds("1 + 2 * 3 == 7", n, &[0; 4]));
        assert!(holds("1 < 2 == 1", n, &[0; 4]));
        assert!(holds("0 && 0 || 1", n, &[0; 4]));
        assert!(!holds("0 && (0 || 1)", n, &[0; 4]));
        assert!(holds("!(BX > BY) && -BX < 0", n, &[8, 16, 0, 0]));
        assert!(holds("BX", n, &[3, 0, 0, 0]));
        assert!(!holds("BX - 3", n, &[3, 0, 0, 0]));
    }

    #[test]
    fn division_by_zero_and_overflow_make_a_constraint_false_not_a_panic() {
        let n = &["A", "B"];
        assert!(!holds("A / B > 0", n, &[4, 0]));
        assert!(!holds("A % B == 0", n, &[4, 0]));
        assert!(!holds("A * A > 0", n, &[i64::MAX, 0]));
        // Short-circuit guards as in C.
        assert!(!holds("B != 0 && A % B == 0", n, &[4, 0]));
        assert!(holds("B == 0 || A % B == 0", n, &[4, 0]));
    }

    #[test]
    fn mistakes_are_named() {
        for (text, needle) in [
            ("Q < 4", "unknown name `Q` (the tuned parameters are A)"),
            ("A <", "ends too early"),
            ("(A < 4", "not closed"),
            ("A 4", "unexpected `4`"),
            ("A ^ 4", "unexpected `^`"),
            ("A = 4", "unexpected `=`"),
            ("12abc > A", "not an integer"),
            ("  ", "empty"),
        ] {
            let err = Constraint::parse(text, &["A"]).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
        let err = Constraint::parse("A > 1", &[]).unwrap_err();
        assert!(err.contains("no parameter is declared"), "{err}");
    }

    #[test]
    fn reports_the_parameters_it_reads() {
        let c = Constraint::parse("C * A <= 1024 && A > 1", &["A", "B", "C"]).unwrap();
        assert_eq!(c.parameters(), vec![2, 0]);
        assert_eq!(c.text(), "C * A <= 1024 && A > 1");
    }
}

//! Arithmetic over a task's size dimensions, for work models written as
//! data (`work = "8 * NX * NY * n_steps"`): numbers, dimension names,
//! `+ - * /`, unary minus and parentheses, evaluated in f64. Parsed once,
//! when the task is loaded, so a typo is an error naming the task and not
//! a wrong score.

use crate::syntax::{self, Grammar, Node, SyntaxError, Tree};

/// A parsed expression; names are resolved to dimension indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    text: String,
    node: Tree<Arithmetic>,
}

/// The grammar of work models: f64 literals (`1_000`, `1.5e3`, `.5`),
/// `+ -` looser than `* /`, and unary minus.
struct Arithmetic;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Add,
    Sub,
    Mul,
    Div,
}

/// Unary minus, the one prefix operator of work models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Minus;

impl Grammar for Arithmetic {
    type Number = f64;
    type Prefix = Minus;
    type Infix = Operator;

    const LEVELS: &'static [&'static [(&'static str, Operator)]] = &[
        &[("+", Operator::Add), ("-", Operator::Sub)],
        &[("*", Operator::Mul), ("/", Operator::Div)],
    ];
    const PREFIXES: &'static [(&'static str, Minus)] = &[("-", Minus)];

    /// Digits, `.`, `_` and `e`, with a sign right after an `e`, from a
    /// digit or a `.` on.
    fn number_length(rest: &str) -> Option<usize> {
        let bytes = rest.as_bytes();
        if !bytes
            .first()
            .is_some_and(|b| b.is_ascii_digit() || *b == b'.')
        {
            return None;
        }
        let mut end = 1;
        while end < bytes.len()
            && (matches!(bytes[end], b'0'..=b'9' | b'.' | b'_' | b'e')
                || (matches!(bytes[end], b'-' | b'+') && bytes[end - 1] == b'e'))
        {
            end += 1;
        }
        Some(end)
    }

    /// The literal without its `_` separators, read as an f64.
    fn number(literal: &str) -> Result<f64, String> {
        let clean: String = literal.chars().filter(|&c| c != '_').collect();
        match clean.parse::<f64>() {
            Ok(v) => Ok(v),
            Err(_) => Err(clean),
        }
    }
}

impl Expr {
    /// Parse `text` over the dimension names `dims`.
    pub fn parse(text: &str, dims: &[&str]) -> Result<Expr, String> {
        let node = syntax::parse::<Arithmetic>(text, dims).map_err(|e| message(e, text, dims))?;
        Ok(Expr {
            text: text.to_string(),
            node,
        })
    }

    /// The value for dimension values `dims` (in the order parsed with).
    pub fn eval(&self, dims: &[f64]) -> f64 {
        fn go(n: &Tree<Arithmetic>, dims: &[f64]) -> f64 {
            match n {
                Node::Number(v) => *v,
                Node::Name(i) => dims.get(*i).copied().unwrap_or(f64::NAN),
                Node::Prefix(Minus, a) => -go(a, dims),
                Node::Infix(a, op, b) => {
                    let (a, b) = (go(a, dims), go(b, dims));
                    match op {
                        Operator::Add => a + b,
                        Operator::Sub => a - b,
                        Operator::Mul => a * b,
                        Operator::Div => a / b,
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

/// A work model's wording of `error` in `text`: characters, numbers and
/// leftovers it cannot read name the text, unknown names the dimensions.
fn message(error: SyntaxError, text: &str, dims: &[&str]) -> String {
    match error {
        SyntaxError::UnexpectedCharacter(_) | SyntaxError::TrailingToken(_) => {
            format!("{error} in `{text}`")
        }
        SyntaxError::BadNumber(literal) => format!("`{literal}` is not a number in `{text}`"),
        SyntaxError::UnknownName(n) => {
            format!(
                "unknown name `{n}` (the dimensions are {})",
                dims.join(", ")
            )
        }
        other => other.to_string(),
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

    /// What work models accept and constraints (kevo-tune, same parser)
    /// do not, and the other way round: pinned here so that a change to
    /// the shared parser cannot move one language's syntax to the other.
    #[test]
    fn the_work_model_language_is_its_own() {
        // Fractions, exponents and a leading `.` are numbers here.
        assert_eq!(eval(".5 * N + 1e-3 * 1e+3", &["N"], &[4.0]), 3.0);
        assert_eq!(eval("-(-N)", &["N"], &[3.0]), 3.0);
        for (text, message) in [
            ("", "the expression ends too early"),
            ("   ", "the expression ends too early"),
            // A letter after digits starts a name (the constraint language
            // reads `12abc` as one bad integer).
            ("12abc", "unexpected `abc` in `12abc`"),
            // No hexadecimal: `0x10` is 0 followed by the name `x10`.
            ("0x10", "unexpected `x10` in `0x10`"),
            ("1e", "`1e` is not a number in `1e`"),
            // Only a lower-case `e` marks an exponent.
            ("1E3", "unexpected `E3` in `1E3`"),
            ("1_0.5_._", "`10.5.` is not a number in `1_0.5_._`"),
            ("N % 2", "unexpected `%` in `N % 2`"),
            ("N < 2", "unexpected `<` in `N < 2`"),
            ("!N", "unexpected `!` in `!N`"),
            ("N && N", "unexpected `&` in `N && N`"),
            ("N * (", "the expression ends too early"),
            ("N * )", "unexpected `)`"),
            ("(N))", "unexpected `)` in `(N))`"),
            ("N é", "unexpected `é` in `N é`"),
            ("M", "unknown name `M` (the dimensions are N, K)"),
        ] {
            assert_eq!(
                Expr::parse(text, &["N", "K"]).unwrap_err(),
                message,
                "{text:?}"
            );
        }
        assert_eq!(
            Expr::parse("2 * x", &[]).unwrap_err(),
            "unknown name `x` (the dimensions are )"
        );
        assert_eq!(Expr::parse(" N ", &["N"]).unwrap().text(), " N ");
    }
}

//! The expressions of `// kevo: require` lines: integer arithmetic over the
//! tuned parameters with comparisons and logic, C's precedence and C's
//! truth (zero is false). Parsed once with the declarations, so a typo or
//! an unknown name is an error naming the line before anything is compiled.

use kevo_tasks::syntax::{self, Grammar, Node, SyntaxError, Tree};

use crate::integer::parse_integer;

/// A parsed constraint; names are resolved to parameter indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    text: String,
    node: Tree<RequireSyntax>,
}

/// The grammar of `// kevo: require`: integer literals, C's binary
/// operators at C's precedence, `!` and unary minus.
struct RequireSyntax;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unary {
    Not,
    Neg,
}

impl Grammar for RequireSyntax {
    type Number = i64;
    type Prefix = Unary;
    type Infix = Op;

    /// Binary operators by precedence level, loosest first.
    const LEVELS: &'static [&'static [(&'static str, Op)]] = &[
        &[("||", Op::Or)],
        &[("&&", Op::And)],
        &[("==", Op::Eq), ("!=", Op::Ne)],
        &[("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)],
        &[("+", Op::Add), ("-", Op::Sub)],
        &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Rem)],
    ];
    const PREFIXES: &'static [(&'static str, Unary)] = &[("!", Unary::Not), ("-", Unary::Neg)];

    /// From a digit, the whole run of letters, digits and `_` (so `12abc`
    /// is one literal, and not a valid one).
    fn number_length(rest: &str) -> Option<usize> {
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        Some(
            rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len()),
        )
    }

    fn number(literal: &str) -> Result<i64, String> {
        parse_integer(literal).ok_or_else(|| literal.to_string())
    }
}

impl Constraint {
    /// Parse `text` over the parameter names `names`.
    pub fn parse(text: &str, names: &[&str]) -> Result<Constraint, String> {
        // Only whitespace reads as no token at all (and never as an error).
        if text.trim().is_empty() {
            return Err("the constraint is empty".into());
        }
        let node = syntax::parse::<RequireSyntax>(text, names).map_err(|e| message(e, names))?;
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
        fn go(n: &Tree<RequireSyntax>, out: &mut Vec<usize>) {
            match n {
                Node::Number(_) => {}
                Node::Name(i) => {
                    if !out.contains(i) {
                        out.push(*i);
                    }
                }
                Node::Prefix(_, a) => go(a, out),
                Node::Infix(a, _, b) => {
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

/// A constraint's wording of `error`: integers, and unknown names by the
/// tuned parameters (or their absence).
fn message(error: SyntaxError, names: &[&str]) -> String {
    match error {
        SyntaxError::BadNumber(digits) => format!("`{digits}` is not an integer"),
        SyntaxError::UnknownName(n) if names.is_empty() => {
            format!("unknown name `{n}`: no parameter is declared with `// kevo: tune`")
        }
        SyntaxError::UnknownName(n) => format!(
            "unknown name `{n}` (the tuned parameters are {})",
            names.join(", ")
        ),
        other => other.to_string(),
    }
}

fn eval(n: &Tree<RequireSyntax>, values: &[i64]) -> Option<i64> {
    Some(match n {
        Node::Number(v) => *v,
        Node::Name(i) => *values.get(*i)?,
        Node::Prefix(Unary::Not, a) => i64::from(eval(a, values)? == 0),
        Node::Prefix(Unary::Neg, a) => eval(a, values)?.checked_neg()?,
        Node::Infix(a, op, b) => {
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

    /// What constraints accept and work models (kevo-tasks, same parser)
    /// do not, and the other way round: pinned here so that a change to
    /// the shared parser cannot move one language's syntax to the other.
    #[test]
    fn the_constraint_language_is_its_own() {
        let n = &["A", "B"];
        // Hexadecimal and `_` separators; comparisons, logic and `%`.
        assert!(holds("A == 0x1_0 && !(B % 2) || 0", n, &[16, 4]));
        assert!(holds("--A == A && !!A", n, &[3, 0]));
        assert!(holds("A<=B&&B>=A&&A!=B+1", n, &[2, 2]));
        for (text, message) in [
            ("", "the constraint is empty"),
            ("\t \n", "the constraint is empty"),
            // No fractions or exponents: `1.5` is 1 then an unexpected `.`.
            ("A < 1.5", "unexpected `.`"),
            ("A < .5", "unexpected `.`"),
            ("A < 1e3", "`1e3` is not an integer"),
            ("A < 0x", "`0x` is not an integer"),
            ("A < 12abc", "`12abc` is not an integer"),
            (
                "A < 99999999999999999999",
                "`99999999999999999999` is not an integer",
            ),
            ("A & B", "unexpected `&`"),
            ("A | B", "unexpected `|`"),
            ("A < ", "the expression ends too early"),
            ("A < )", "unexpected `)`"),
            ("(A < 4))", "unexpected `)`"),
            ("A < B é", "unexpected `é`"),
            ("C", "unknown name `C` (the tuned parameters are A, B)"),
        ] {
            assert_eq!(Constraint::parse(text, n).unwrap_err(), message, "{text:?}");
        }
        assert_eq!(Constraint::parse("1 é", &[]).unwrap_err(), "unexpected `é`");
        assert_eq!(
            Constraint::parse("x", &[]).unwrap_err(),
            "unknown name `x`: no parameter is declared with `// kevo: tune`"
        );
        assert_eq!(Constraint::parse(" A > 1 ", n).unwrap().text(), "A > 1");
    }
}

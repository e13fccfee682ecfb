//! What a Triton candidate declares for kevo in comments, read without
//! running Python: its launch grid in programs per axis, and its warps and
//! pipeline stages per kernel.
//!
//! ```python
//! # kevo: grid saxpy = (cdiv(n, BLOCK),)
//! # kevo: warps saxpy = 4
//! # kevo: stages saxpy = 3
//! ```
//!
//! A grid is up to three integer expressions over the kernel's parameter
//! names (the task's scalars, with the values kevo passes) and its
//! `tl.constexpr` values: integers, names, `+ - * // % ( )`, `cdiv(a, b)`,
//! `min(a, b)` and `max(a, b)`. The analogue of a CUDA candidate's block
//! lines: kevo computes the launch, the candidate only declares it.

use std::collections::BTreeMap;

/// The directives of one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelDirectives {
    /// Programs per axis, one to three expressions.
    pub grid: Vec<GridExpr>,
    /// Warps per program (Triton's `num_warps`); 4 when not declared.
    pub warps: u32,
    /// Software pipeline stages (Triton's `num_stages`); 3 when not
    /// declared.
    pub stages: u32,
}

/// A malformed or missing directive: the line and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DirectiveError(pub String);

/// Read the directives of `kernels` from `source`. Every kernel needs a
/// grid; a directive for a kernel that is not an entry point, or twice for
/// one, is an error.
pub fn parse(
    source: &str,
    kernels: &[&str],
) -> Result<BTreeMap<String, KernelDirectives>, DirectiveError> {
    let mut grids: BTreeMap<String, Vec<GridExpr>> = BTreeMap::new();
    let mut warps: BTreeMap<String, u32> = BTreeMap::new();
    let mut stages: BTreeMap<String, u32> = BTreeMap::new();
    for (index, line) in source.lines().enumerate() {
        let at = index + 1;
        let Some(rest) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("kevo:") else {
            continue;
        };
        let rest = rest.trim();
        let (kind, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let (name, value) = rest.split_once('=').ok_or_else(|| {
            DirectiveError(format!(
                "line {at}: `# kevo: {kind} KERNEL = ...` needs `=` and a value"
            ))
        })?;
        let name = name.trim();
        if !kernels.contains(&name) {
            return Err(DirectiveError(format!(
                "line {at}: `{name}` is not an entry point of this task (they are: {})",
                kernels.join(", ")
            )));
        }
        let duplicate =
            |what: &str| DirectiveError(format!("line {at}: a second `{what}` for `{name}`"));
        match kind {
            "grid" => {
                let grid = parse_grid(value.trim())
                    .map_err(|e| DirectiveError(format!("line {at}: grid of `{name}`: {e}")))?;
                if grids.insert(name.to_string(), grid).is_some() {
                    return Err(duplicate("grid"));
                }
            }
            "warps" | "stages" => {
                let n: u32 = value.trim().parse().map_err(|_| {
                    DirectiveError(format!(
                        "line {at}: {kind} of `{name}` must be a whole number, not `{}`",
                        value.trim()
                    ))
                })?;
                let ok = match kind {
                    "warps" => n.is_power_of_two() && n <= 32,
                    _ => (1..=8).contains(&n),
                };
                if !ok {
                    return Err(DirectiveError(format!(
                        "line {at}: {kind} of `{name}` is {n}; warps must be a power of two up to 32 (1024 threads), stages 1 to 8"
                    )));
                }
                let map = if kind == "warps" {
                    &mut warps
                } else {
                    &mut stages
                };
                if map.insert(name.to_string(), n).is_some() {
                    return Err(duplicate(kind));
                }
            }
            other => {
                return Err(DirectiveError(format!(
                    "line {at}: unknown directive `# kevo: {other}`; they are grid, warps and stages"
                )));
            }
        }
    }
    let mut out = BTreeMap::new();
    for &kernel in kernels {
        let grid = grids.remove(kernel).ok_or_else(|| {
            DirectiveError(format!(
                "no grid for `{kernel}`: declare one as `# kevo: grid {kernel} = (cdiv(n, BLOCK),)`, programs per axis"
            ))
        })?;
        out.insert(
            kernel.to_string(),
            KernelDirectives {
                grid,
                warps: warps.remove(kernel).unwrap_or(4),
                stages: stages.remove(kernel).unwrap_or(3),
            },
        );
    }
    Ok(out)
}

/// `(a, b, c)`, `(a,)` or a bare `a`: one to three expressions.
fn parse_grid(text: &str) -> Result<Vec<GridExpr>, String> {
    let inner = match text.strip_prefix('(') {
        Some(rest) if rest.ends_with(')') && balanced_outer(text) => &rest[..rest.len() - 1],
        _ => text,
    };
    let parts = split_top_level(inner);
    let parts: Vec<&str> = parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!(
            "`{text}` has {} axes; a grid has one to three",
            parts.len()
        ));
    }
    parts.into_iter().map(GridExpr::parse).collect()
}

/// Whether the parentheses around `text` enclose all of it.
fn balanced_outer(text: &str) -> bool {
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 && i + 1 != text.len() {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// An integer expression of a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct GridExpr {
    text: String,
    node: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Number(i64),
    Name(String),
    Neg(Box<Node>),
    Binary(Box<Node>, Op, Box<Node>),
    Call(Function, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add,
    Sub,
    Mul,
    FloorDiv,
    Rem,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Function {
    Cdiv,
    Min,
    Max,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(i64),
    Name(String),
    Symbol(&'static str),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '_') {
                i += 1;
            }
            let digits: String = chars[start..i].iter().filter(|c| **c != '_').collect();
            let value = digits
                .parse()
                .map_err(|_| format!("`{digits}` is too large"))?;
            tokens.push(Token::Number(value));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Name(chars[start..i].iter().collect()));
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            tokens.push(Token::Symbol("//"));
            i += 2;
        } else {
            let symbol = match c {
                '+' => "+",
                '-' => "-",
                '*' => "*",
                '%' => "%",
                '(' => "(",
                ')' => ")",
                ',' => ",",
                '/' => return Err("`/` is not integer division; write `//` or cdiv(a, b)".into()),
                other => return Err(format!("unexpected `{other}`")),
            };
            tokens.push(Token::Symbol(symbol));
            i += 1;
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, symbol: &str) -> bool {
        if matches!(self.peek(), Some(Token::Symbol(s)) if *s == symbol) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn sum(&mut self) -> Result<Node, String> {
        let mut left = self.product()?;
        loop {
            let op = if self.eat("+") {
                Op::Add
            } else if self.eat("-") {
                Op::Sub
            } else {
                return Ok(left);
            };
            left = Node::Binary(Box::new(left), op, Box::new(self.product()?));
        }
    }

    fn product(&mut self) -> Result<Node, String> {
        let mut left = self.unary()?;
        loop {
            let op = if self.eat("*") {
                Op::Mul
            } else if self.eat("//") {
                Op::FloorDiv
            } else if self.eat("%") {
                Op::Rem
            } else {
                return Ok(left);
            };
            left = Node::Binary(Box::new(left), op, Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Node, String> {
        if self.eat("-") {
            return Ok(Node::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Node, String> {
        match self.tokens.get(self.at).cloned() {
            Some(Token::Number(v)) => {
                self.at += 1;
                Ok(Node::Number(v))
            }
            Some(Token::Name(name)) => {
                self.at += 1;
                let function = match name.as_str() {
                    "cdiv" | "triton.cdiv" => Some(Function::Cdiv),
                    "min" => Some(Function::Min),
                    "max" => Some(Function::Max),
                    _ => None,
                };
                match function {
                    Some(f) if self.eat("(") => {
                        let a = self.sum()?;
                        if !self.eat(",") {
                            return Err(format!("{name}() takes two arguments"));
                        }
                        let b = self.sum()?;
                        if !self.eat(")") {
                            return Err(format!("{name}() takes two arguments"));
                        }
                        Ok(Node::Call(f, Box::new(a), Box::new(b)))
                    }
                    _ => Ok(Node::Name(name)),
                }
            }
            Some(Token::Symbol("(")) => {
                self.at += 1;
                let inner = self.sum()?;
                if !self.eat(")") {
                    return Err("a `(` is not closed".into());
                }
                Ok(inner)
            }
            Some(Token::Symbol(s)) => Err(format!("unexpected `{s}`")),
            None => Err("the expression ends too early".into()),
        }
    }
}

impl GridExpr {
    pub fn parse(text: &str) -> Result<GridExpr, String> {
        let tokens = tokenize(text)?;
        let mut parser = Parser {
            tokens: &tokens,
            at: 0,
        };
        let node = parser.sum()?;
        if let Some(t) = tokens.get(parser.at) {
            let shown = match t {
                Token::Number(v) => v.to_string(),
                Token::Name(n) => n.clone(),
                Token::Symbol(s) => s.to_string(),
            };
            return Err(format!("unexpected `{shown}` in `{text}`"));
        }
        Ok(GridExpr {
            text: text.to_string(),
            node,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The number of programs along this axis for the named `values`; a
    /// name without a value, a division by zero or an overflow is an
    /// error naming it.
    pub fn eval(&self, values: &BTreeMap<String, i64>) -> Result<i64, String> {
        fn go(n: &Node, values: &BTreeMap<String, i64>) -> Result<i64, String> {
            let overflow = || "the grid overflows".to_string();
            Ok(match n {
                Node::Number(v) => *v,
                Node::Name(name) => *values.get(name).ok_or_else(|| {
                    format!("`{name}` is not a parameter or tl.constexpr of the kernel")
                })?,
                Node::Neg(a) => go(a, values)?.checked_neg().ok_or_else(overflow)?,
                Node::Binary(a, op, b) => {
                    let (a, b) = (go(a, values)?, go(b, values)?);
                    match op {
                        Op::Add => a.checked_add(b).ok_or_else(overflow)?,
                        Op::Sub => a.checked_sub(b).ok_or_else(overflow)?,
                        Op::Mul => a.checked_mul(b).ok_or_else(overflow)?,
                        Op::FloorDiv | Op::Rem if b == 0 => return Err("division by zero".into()),
                        Op::FloorDiv => a.div_euclid(b),
                        Op::Rem => a.rem_euclid(b),
                    }
                }
                Node::Call(f, a, b) => {
                    let (a, b) = (go(a, values)?, go(b, values)?);
                    match f {
                        Function::Cdiv if b <= 0 => {
                            return Err(format!("cdiv by {b}"));
                        }
                        Function::Cdiv => a.checked_add(b - 1).ok_or_else(overflow)?.div_euclid(b),
                        Function::Min => a.min(b),
                        Function::Max => a.max(b),
                    }
                }
            })
        }
        go(&self.node, values)
    }
}

/// The launch grid (programs per axis, three axes) of `directives` for
/// `values`; an axis below 1 or above CUDA's limits is an error.
pub fn grid(
    directives: &KernelDirectives,
    values: &BTreeMap<String, i64>,
) -> Result<[u32; 3], String> {
    // CUDA's grid limits: 2^31 - 1 along x, 65535 along y and z.
    const LIMITS: [i64; 3] = [(1 << 31) - 1, 65_535, 65_535];
    let mut out = [1u32; 3];
    for (axis, expr) in directives.grid.iter().enumerate() {
        let v = expr
            .eval(values)
            .map_err(|e| format!("grid axis {axis} (`{}`): {e}", expr.text()))?;
        if v < 1 || v > LIMITS[axis] {
            return Err(format!(
                "grid axis {axis} (`{}`) is {v} programs; it must be 1 to {}",
                expr.text(),
                LIMITS[axis]
            ));
        }
        out[axis] = v as u32;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn grids_warps_and_stages_are_read_from_comments() {
        let source = "import triton\n# kevo: grid saxpy = (cdiv(n, BLOCK),)\n  #kevo: warps saxpy = 8\n# an ordinary comment\n# kevo: grid tile = (cdiv(nx, 16), ny // 4 + 1, 2)\n# kevo: stages tile = 2\n";
        let d = parse(source, &["saxpy", "tile"]).unwrap();
        let v = values(&[("n", 1000), ("BLOCK", 256), ("nx", 33), ("ny", 8)]);
        assert_eq!(grid(&d["saxpy"], &v).unwrap(), [4, 1, 1]);
        assert_eq!((d["saxpy"].warps, d["saxpy"].stages), (8, 3));
        assert_eq!(grid(&d["tile"], &v).unwrap(), [3, 3, 2]);
        assert_eq!((d["tile"].warps, d["tile"].stages), (4, 2));
    }

    #[test]
    fn integer_arithmetic_follows_python() {
        let v = values(&[("a", -7), ("b", 2)]);
        let e = |t: &str| GridExpr::parse(t).unwrap().eval(&v).unwrap();
        assert_eq!(e("a // b"), -4);
        assert_eq!(e("a % b"), 1);
        assert_eq!(e("cdiv(9, b)"), 5);
        assert_eq!(e("max(min(3, 5), 1 + 2 * 3)"), 7);
        assert_eq!(e("-(b - 5)"), 3);
        assert_eq!(e("1_000 * b"), 2000);
    }

    #[test]
    fn mistakes_are_errors_that_say_what_is_wrong() {
        let err = |source: &str| parse(source, &["k"]).unwrap_err().0;
        assert!(err("").contains("no grid for `k`"));
        assert!(err("# kevo: grid other = (1,)").contains("not an entry point"));
        assert!(err("# kevo: grid k = (n / 2,)").contains("`//`"));
        assert!(err("# kevo: grid k = (1, 2, 3, 4)").contains("one to three"));
        assert!(err("# kevo: grid k = (1,)\n# kevo: grid k = (2,)").contains("a second `grid`"));
        assert!(err("# kevo: grid k = (1,)\n# kevo: warps k = 3").contains("power of two"));
        assert!(err("# kevo: grid k = (1,)\n# kevo: blocks k = 3").contains("unknown directive"));
        assert!(err("# kevo: grid k (1,)").contains("needs `=`"));
        assert!(err("# kevo: grid k = (cdiv(n),)").contains("two arguments"));
        let d = parse("# kevo: grid k = (cdiv(n, B), m)", &["k"]).unwrap();
        let e = grid(&d["k"], &values(&[("n", 10), ("B", 0), ("m", 1)])).unwrap_err();
        assert!(e.contains("cdiv by 0"), "{e}");
        let e = grid(&d["k"], &values(&[("n", 10), ("B", 4)])).unwrap_err();
        assert!(e.contains("`m` is not a parameter"), "{e}");
        let e = grid(&d["k"], &values(&[("n", 10), ("B", 4), ("m", 70_000)])).unwrap_err();
        assert!(e.contains("1 to 65535"), "{e}");
    }
}

//! The one tokenizer and parser for kevo's small infix expressions: the
//! work models of task definitions ([`crate::Expr`]) and the
//! `// kevo: require` constraints of tunable kernels (kevo-tune). A
//! [`Grammar`] says what a number literal is and which operators exist at
//! which precedence; whitespace, names, parentheses, precedence climbing
//! and name resolution are shared. Errors are typed ([`SyntaxError`]) so
//! that each language keeps its own wording.

use std::fmt;
use std::marker::PhantomData;

/// Whether `s` is a C identifier: a letter or `_`, then letters, digits
/// and `_`. Names in expressions are read by the same rule.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One expression language: its number literals and its operators.
pub trait Grammar {
    /// The value of a number literal.
    type Number: Copy + fmt::Display;
    /// The prefix operators.
    type Prefix: Copy + 'static;
    /// The infix operators.
    type Infix: Copy + 'static;

    /// Infix operators by precedence level, loosest first; every level is
    /// left-associative.
    const LEVELS: &'static [&'static [(&'static str, Self::Infix)]];
    /// Prefix operators; they bind tighter than any infix operator.
    const PREFIXES: &'static [(&'static str, Self::Prefix)];

    /// The length in bytes (at least 1) of the number literal `rest` starts
    /// with, or `None` where it does not start with one.
    fn number_length(rest: &str) -> Option<usize>;

    /// The value of a number literal, or the text the error should quote.
    fn number(literal: &str) -> Result<Self::Number, String>;
}

/// A parsed expression over numbers `N`, prefix operators `P` and infix
/// operators `I`. Names are resolved to their index in the names the
/// expression was parsed over.
#[derive(Debug, Clone, PartialEq)]
pub enum Node<N, P, I> {
    Number(N),
    Name(usize),
    Prefix(P, Box<Node<N, P, I>>),
    Infix(Box<Node<N, P, I>>, I, Box<Node<N, P, I>>),
}

/// The expressions of grammar `G`.
pub type Tree<G> = Node<<G as Grammar>::Number, <G as Grammar>::Prefix, <G as Grammar>::Infix>;

/// Why a text is not an expression. The wording is the part both languages
/// share; each caller adds its own context (the text, the names it knows).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// A character that starts no token.
    #[error("unexpected `{0}`")]
    UnexpectedCharacter(char),
    /// A number literal the grammar cannot read (the text it quotes).
    #[error("`{0}` is not a number")]
    BadNumber(String),
    /// A token where an operand was expected.
    #[error("unexpected `{0}`")]
    UnexpectedToken(String),
    /// A token after a complete expression.
    #[error("unexpected `{0}`")]
    TrailingToken(String),
    #[error("a `(` is not closed")]
    UnclosedParenthesis,
    #[error("the expression ends too early")]
    EndsEarly,
    /// A name that is not among the names the expression may use.
    #[error("unknown name `{0}`")]
    UnknownName(String),
}

/// Parse `text` in grammar `G`, resolving names to their index in `names`.
pub fn parse<G: Grammar>(text: &str, names: &[&str]) -> Result<Tree<G>, SyntaxError> {
    let tokens = tokenize::<G>(text)?;
    let mut parser = Parser::<G> {
        tokens: &tokens,
        at: 0,
        names,
        grammar: PhantomData,
    };
    let node = parser.level(0)?;
    if let Some(t) = tokens.get(parser.at) {
        return Err(SyntaxError::TrailingToken(t.to_string()));
    }
    Ok(node)
}

#[derive(Debug, Clone, PartialEq)]
enum Token<Number> {
    Number(Number),
    Name(String),
    Symbol(&'static str),
}

impl<Number: fmt::Display> fmt::Display for Token<Number> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Number(v) => write!(f, "{v}"),
            Token::Name(n) => f.write_str(n),
            Token::Symbol(s) => f.write_str(s),
        }
    }
}

/// The longest operator or parenthesis of `G` that `rest` starts with.
fn symbol_at<G: Grammar>(rest: &str) -> Option<&'static str> {
    let infixes = G::LEVELS
        .iter()
        .flat_map(|level| level.iter().map(|(s, _)| *s));
    let prefixes = G::PREFIXES.iter().map(|(s, _)| *s);
    infixes
        .chain(prefixes)
        .chain(["(", ")"])
        .filter(|s| rest.starts_with(s))
        .max_by_key(|s| s.len())
}

fn tokenize<G: Grammar>(text: &str) -> Result<Vec<Token<G::Number>>, SyntaxError> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if let Some(end) = G::number_length(rest) {
            let value = G::number(&rest[..end]).map_err(SyntaxError::BadNumber)?;
            tokens.push(Token::Number(value));
            rest = &rest[end..];
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            tokens.push(Token::Name(rest[..end].to_string()));
            rest = &rest[end..];
        } else if let Some(symbol) = symbol_at::<G>(rest) {
            tokens.push(Token::Symbol(symbol));
            rest = &rest[symbol.len()..];
        } else {
            return Err(SyntaxError::UnexpectedCharacter(c));
        }
    }
    Ok(tokens)
}

struct Parser<'a, G: Grammar> {
    tokens: &'a [Token<G::Number>],
    at: usize,
    names: &'a [&'a str],
    grammar: PhantomData<G>,
}

impl<G: Grammar> Parser<'_, G> {
    fn symbol(&self) -> Option<&'static str> {
        match self.tokens.get(self.at) {
            Some(Token::Symbol(s)) => Some(s),
            _ => None,
        }
    }

    /// The operands of precedence level `level` joined by its operators,
    /// left to right; past the last level, a prefixed operand.
    fn level(&mut self, level: usize) -> Result<Tree<G>, SyntaxError> {
        let Some(operators) = G::LEVELS.get(level) else {
            return self.prefixed();
        };
        let mut left = self.level(level + 1)?;
        while let Some(&(_, op)) = self
            .symbol()
            .and_then(|s| operators.iter().find(|(text, _)| *text == s))
        {
            self.at += 1;
            let right = self.level(level + 1)?;
            left = Node::Infix(Box::new(left), op, Box::new(right));
        }
        Ok(left)
    }

    fn prefixed(&mut self) -> Result<Tree<G>, SyntaxError> {
        let prefix = self
            .symbol()
            .and_then(|s| G::PREFIXES.iter().find(|(text, _)| *text == s));
        match prefix {
            Some(&(_, op)) => {
                self.at += 1;
                Ok(Node::Prefix(op, Box::new(self.prefixed()?)))
            }
            None => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<Tree<G>, SyntaxError> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        match token {
            Some(Token::Number(v)) => Ok(Node::Number(v)),
            Some(Token::Name(n)) => match self.names.iter().position(|p| *p == n) {
                Some(i) => Ok(Node::Name(i)),
                None => Err(SyntaxError::UnknownName(n)),
            },
            Some(Token::Symbol("(")) => {
                let inner = self.level(0)?;
                if self.symbol() != Some(")") {
                    return Err(SyntaxError::UnclosedParenthesis);
                }
                self.at += 1;
                Ok(inner)
            }
            Some(t) => Err(SyntaxError::UnexpectedToken(t.to_string())),
            None => Err(SyntaxError::EndsEarly),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grammar with two levels, a prefix and one-digit numbers, to show
    /// what the parser does independently of either language.
    struct Toy;

    impl Grammar for Toy {
        type Number = u8;
        type Prefix = char;
        type Infix = char;
        const LEVELS: &'static [&'static [(&'static str, char)]] =
            &[&[("<=", 'l'), ("<", '<')], &[("+", '+')]];
        const PREFIXES: &'static [(&'static str, char)] = &[("!", '!')];

        fn number_length(rest: &str) -> Option<usize> {
            rest.starts_with(|c: char| c.is_ascii_digit()).then_some(1)
        }

        fn number(literal: &str) -> Result<u8, String> {
            literal.parse().map_err(|_| literal.to_string())
        }
    }

    fn toy(text: &str) -> Result<Tree<Toy>, SyntaxError> {
        parse::<Toy>(text, &["a", "b"])
    }

    #[test]
    fn levels_bind_loosest_first_and_left_to_right() {
        use Node::*;
        let n = |v| Box::new(Number(v));
        assert_eq!(
            toy("1 + 2 < b + a").unwrap(),
            Infix(
                Box::new(Infix(n(1), '+', n(2))),
                '<',
                Box::new(Infix(Box::new(Name(1)), '+', Box::new(Name(0))))
            )
        );
        assert_eq!(
            toy("1 + 2 + 3").unwrap(),
            Infix(Box::new(Infix(n(1), '+', n(2))), '+', n(3))
        );
        // The longest symbol wins: `<=` is one operator, not `<` then `=`.
        assert_eq!(toy("1<=2").unwrap(), Infix(n(1), 'l', n(2)));
        assert_eq!(
            toy("!!(a)").unwrap(),
            Prefix('!', Box::new(Prefix('!', Box::new(Name(0)))))
        );
    }

    #[test]
    fn errors_are_typed() {
        assert_eq!(toy("1 ^ 2"), Err(SyntaxError::UnexpectedCharacter('^')));
        assert_eq!(toy("1 2"), Err(SyntaxError::TrailingToken("2".into())));
        assert_eq!(toy("1 + )"), Err(SyntaxError::UnexpectedToken(")".into())));
        assert_eq!(toy("(1"), Err(SyntaxError::UnclosedParenthesis));
        assert_eq!(toy("1 +"), Err(SyntaxError::EndsEarly));
        assert_eq!(toy(""), Err(SyntaxError::EndsEarly));
        assert_eq!(toy("c"), Err(SyntaxError::UnknownName("c".into())));
        assert!(is_identifier("_a1") && !is_identifier("1a") && !is_identifier(""));
    }
}

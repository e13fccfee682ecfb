//! Colour on a terminal, as cargo and ripgrep use it: a few words stand
//! out (an error, a warning, a new best, a failed attempt), and nothing is
//! coloured when the stream is a pipe or a file, or `NO_COLOR` is set;
//! `CLICOLOR_FORCE=1` colours anyway (for a pager that shows colour).

use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};

/// Which stream the text goes to: colour depends on it being a terminal.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What a word means, and so its colour.
#[derive(Debug, Clone, Copy)]
pub enum Tone {
    Error,
    Warning,
    Good,
    Failed,
    Heading,
}

impl Tone {
    fn style(self) -> Style {
        let colour = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
        match self {
            Tone::Error => colour(AnsiColor::Red).bold(),
            Tone::Warning => colour(AnsiColor::Yellow).bold(),
            Tone::Good => colour(AnsiColor::Green).bold(),
            Tone::Failed => colour(AnsiColor::Red),
            Tone::Heading => Style::new().bold(),
        }
    }
}

/// Whether text for `stream` is coloured, by the conventions above.
pub fn enabled(stream: Stream) -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    if set("CLICOLOR_FORCE") {
        return true;
    }
    match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    }
}

/// `text` in `tone` where `stream` is coloured, else unchanged.
pub fn paint(stream: Stream, tone: Tone, text: &str) -> String {
    if enabled(stream) {
        painted(tone, text)
    } else {
        text.to_string()
    }
}

fn painted(tone: Tone, text: &str) -> String {
    let style = tone.style();
    format!("{style}{text}{style:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_painted_word_is_wrapped_in_its_escape_codes_and_reset() {
        assert_eq!(
            painted(Tone::Error, "error:"),
            "\x1b[1m\x1b[31merror:\x1b[0m"
        );
        assert_eq!(painted(Tone::Heading, "run"), "\x1b[1mrun\x1b[0m");
    }
}

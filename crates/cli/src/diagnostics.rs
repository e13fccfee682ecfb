//! An error as one line for the terminal: the message and each cause it
//! does not already say. Library errors often both show their cause in
//! their message (`proposer: {0}`) and return it as their source, so
//! anyhow's `{:#}` printed the same words twice ("X: X").

/// The error and its causes, joined by ": ", each cause once.
pub fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !cause.is_empty() && !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("no API key: set OPENAI_API_KEY")]
    struct Missing;

    #[derive(Debug, thiserror::Error)]
    enum Wrapping {
        #[error("proposer: {0}")]
        Provider(#[from] Missing),
    }

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated() {
        let error = anyhow::Error::from(Wrapping::from(Missing));
        assert_eq!(
            format!("{error:#}"),
            "proposer: no API key: set OPENAI_API_KEY: no API key: set OPENAI_API_KEY"
        );
        assert_eq!(
            error_text(&error),
            "proposer: no API key: set OPENAI_API_KEY"
        );
    }

    #[test]
    fn a_context_keeps_the_cause_it_does_not_say() {
        let error = anyhow::Error::from(Missing).context("starting run r1");
        assert_eq!(
            error_text(&error),
            "starting run r1: no API key: set OPENAI_API_KEY"
        );
    }
}

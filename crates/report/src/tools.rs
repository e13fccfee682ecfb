//! The report's tool-use section: each tool conversation (`--agent-tools`,
//! `agent:`) with its calls, what each returned, and how it ended.

use std::fmt::Write as _;

use kevo_proposer::tools::Transcript;

use crate::data::RunData;
use crate::svg::escape;

/// Characters of a call's result shown in the table (its first line).
const SHOWN: usize = 160;

/// Nothing for a run without tool conversations.
pub(crate) fn tools_section(data: &RunData) -> String {
    let conversations: Vec<(u32, Transcript)> = data
        .llm_calls
        .iter()
        .filter_map(|c| {
            let t = serde_json::from_value(c.call.transcript.clone()?).ok()?;
            Some((c.iteration, t))
        })
        .collect();
    if conversations.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        r#"<section id="tools"><h2>Tool use</h2><p class="muted">Each proposal's tool calls, in order, with the first line of what each returned.</p><table><tr><th>iteration</th><th>turn</th><th>tool</th><th>status</th><th>worker (s)</th><th>returned</th></tr>"#,
    );
    for (iteration, t) in &conversations {
        let _ = write!(
            s,
            r#"<tr><td>{iteration}</td><td colspan="5"><b>{}</b></td></tr>"#,
            escape(&t.summary())
        );
        for (i, turn) in t.turns.iter().enumerate() {
            for c in &turn.calls {
                let status = match (&c.refused, c.is_error) {
                    (Some(_), _) => "refused",
                    (None, true) => "failed",
                    (None, false) => "ok",
                };
                let first: String = c
                    .result
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(SHOWN)
                    .collect();
                let _ = write!(
                    s,
                    "<tr><td></td><td>{}</td><td>{}</td><td>{status}</td><td>{:.2}</td><td>{}</td></tr>",
                    i + 1,
                    escape(&c.name),
                    c.device_s,
                    escape(&first)
                );
            }
        }
    }
    s.push_str("</table></section>");
    s
}

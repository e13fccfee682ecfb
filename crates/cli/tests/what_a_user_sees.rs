//! What a user reads of a run, as snapshots: `kevo show` and the report of
//! the golden noise-aware search (a compile error, a wrong result, two
//! promotions, a suspicious kernel) on the fixed clock, so every time,
//! spread and score in them is the same on every machine. What differs
//! between machines (the run's name, the device, dates, host seconds, the
//! sandbox, a wrong result's error on this run's random inputs) is
//! written as `<...>`. A change in what a user sees shows in the
//! snapshot's diff (`INSTA_UPDATE=always` or `cargo insta review`
//! accepts it).

use std::path::Path;
use std::process::Output;

use kevo_store::RunId;

use crate::common::succeeded;

/// `kevo show` and `kevo report` of `run`, checked for what a user must
/// find in them and compared with their snapshots.
pub(crate) fn show_and_report(dir: &Path, run: &RunId, kevo: impl Fn(&[&str]) -> Output) {
    let device = device_name(&kevo, run);
    let shown = redact(&succeeded(kevo(&["show", &run.0])), &run.0, &device, dir);
    for must in [
        // The compiler's own words under the failed attempt.
        "expected ';' after expression",
        // A wrong result names its size.
        "wrong: ",
        // Per-size times with their spread.
        "IQR 0.0% of it",
        // Every score and speedup says what measured it.
        "score 0.",
        " re-measured (in-run ",
        "x the seed, confirmed (",
    ] {
        assert!(shown.contains(must), "`kevo show` lacks {must:?}:\n{shown}");
    }
    insta::assert_snapshot!("kevo_show", shown);

    let html = dir.join("report.html");
    let html_arg = html.display().to_string();
    succeeded(kevo(&["report", &run.0, "--out", &html_arg]));
    let page = page_text(&std::fs::read_to_string(&html).unwrap());
    let page = redact(&page, &run.0, &device, dir);
    for must in [
        "expected ';'",
        "spread",
        "winner's score",
        " re-measured (in-run ",
        "x the seed, confirmed (",
        "in-run score",
    ] {
        assert!(page.contains(must), "the report lacks {must:?}:\n{page}");
    }
    insta::assert_snapshot!("kevo_report", page);
}

/// The run's device, as stored (PoCL names the host's CPU).
fn device_name(kevo: &impl Fn(&[&str]) -> Output, run: &RunId) -> String {
    let json: serde_json::Value =
        serde_json::from_str(&succeeded(kevo(&["show", &run.0, "--json"]))).unwrap();
    json["run"]["device"].as_str().unwrap().to_string()
}

/// A page's visible text, a line per block: what a reader sees, without
/// styles, scripts, drawings or markup.
fn page_text(html: &str) -> String {
    let mut text = html.to_string();
    // The settings (this machine's provenance in full) and the host
    // seconds per phase are not what the snapshot is about.
    for id in ["settings", "phases"] {
        if let Some(start) = text.find(&format!("<section id=\"{id}\"")) {
            let end = text[start..]
                .find("</section>")
                .map_or(text.len(), |e| start + e + "</section>".len());
            text.replace_range(start..end, "");
        }
    }
    for tag in ["style", "script", "svg"] {
        while let Some(start) = text.find(&format!("<{tag}")) {
            let close = format!("</{tag}>");
            let end = text[start..]
                .find(&close)
                .map_or(text.len(), |e| start + e + close.len());
            text.replace_range(start..end, "");
        }
    }
    let mut out = String::new();
    let mut in_tag = false;
    let mut tag = String::new();
    for c in text.chars() {
        match (in_tag, c) {
            (false, '<') => {
                in_tag = true;
                tag.clear();
            }
            (true, '>') => {
                in_tag = false;
                let name = tag.trim_start_matches('/').split(' ').next().unwrap_or("");
                match name {
                    "tr" | "p" | "h1" | "h2" | "h3" | "li" | "pre" | "section" | "br" | "table" => {
                        out.push('\n')
                    }
                    "td" | "th" => out.push_str(" | "),
                    _ => {}
                }
            }
            (true, c) => tag.push(c),
            (false, c) => out.push(c),
        }
    }
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty() && l != "|")
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// `text` with what differs between machines and runs written `<...>`:
/// the run's name and folder, the sandbox and provenance lines, PoCL's
/// name for the CPU, dates and host seconds, a wrong result's error on
/// this run's random inputs, and which cache level of this host a working
/// set fits (the fixed clock fixes times and DRAM fractions, not caches).
fn redact(text: &str, run: &str, device: &str, dir: &Path) -> String {
    let text = text
        .replace(run, "<run>")
        .replace(device, "<device>")
        .replace(&dir.display().to_string(), "<dir>");
    let rules: [(&str, &str); 10] = [
        (
            r"(?m)^(\s*)(sandbox|made with):.*$",
            "$1$2: <this machine's>",
        ),
        (
            r"Device .* failed to build the program",
            "Device <this CPU> failed to build the program",
        ),
        (r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?( UTC)?", "<when>"),
        (r"\b\d+(\.\d+)? s\b", "<s>"),
        (
            r"(wrong result at size \S+:|wrong:) [^\n|]*",
            "$1 <error on this run's inputs>",
        ),
        (r", [0-9.]+% of L\d [0-9.]+ GB/s", ""),
        (
            r" ?\((partly )?cache-resident: [^()]*\)| ?\([^()]* working set, past every cache\)",
            " (<where this host keeps it>)",
        ),
        (
            r"(partly )?cache-resident: [^|()]*?(L\d|level) ?|\S+ \S+ working set, past every cache ?",
            "<where this host keeps it> ",
        ),
        (
            r"(at size \S+:) .*?(faster than the hardware allows)",
            "$1 <against this host's caches>: $2",
        ),
        (r"[0-9.]+% of L\d", "<a cache level's share>"),
    ];
    let mut text = text;
    for (pattern, with) in rules {
        text = regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&text, with)
            .into_owned();
    }
    text
}

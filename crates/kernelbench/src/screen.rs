//! Which imported problems measure something: KernelBench's own check
//! passes a null candidate on about 15% of its fp32 problems, and some
//! outputs do not depend on the input at all.

use serde::{Deserialize, Serialize};

use crate::MIN_BASELINE_MS;
use crate::probe::{Probe, Timing};

/// One finding of the screen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "flag", rename_all = "snake_case")]
pub enum Flag {
    /// All zeros passes KernelBench's check (1e-4).
    ZeroPasses,
    /// The output's mean everywhere passes it.
    ConstantPasses,
    /// A copy of an input passes it.
    InputCopyPasses,
    /// A null candidate (`zero`, `const`, `ident`) passes kevo's own check
    /// of the folder.
    NullPassesKevoCheck { candidate: String },
    /// Other inputs give the same output.
    InputIndependent,
    /// Two runs of the reference disagree.
    NotDeterministic,
    /// The eager baseline is under 10 µs: launch overhead dominates.
    FastBaseline { eager_ms: f64 },
    /// Other weights give the same output (a kernel may ignore them).
    WeightIndependent,
    /// The output is constant along these axes.
    FlatAxes { axes: Vec<usize> },
    /// These inputs' values fit none of kevo's generators well; kevo
    /// draws them from the closest one.
    ApproximateInputs { tensors: Vec<String> },
    /// No constant sets the batch alone: the held-out size is the
    /// problem's own size (label `same-size`), so the held-out score shows
    /// nothing the in-distribution one does not.
    NoHeldOutSize,
    /// A published screen (`--survey`, measured elsewhere) finds what this
    /// probe did not.
    Survey { finding: String, drops: bool },
    /// The problem's own size has an output of fewer than
    /// [`crate::MIN_CHECKED_ELEMENTS`] elements (a loss is one number):
    /// each verification seed checks only these.
    FewCheckedElements { elements: u64 },
}

impl Flag {
    /// Whether the problem is left out of an import unless asked for.
    pub fn drops(&self) -> bool {
        matches!(
            self,
            Flag::ZeroPasses
                | Flag::ConstantPasses
                | Flag::InputCopyPasses
                | Flag::NullPassesKevoCheck { .. }
                | Flag::InputIndependent
                | Flag::NotDeterministic
                | Flag::FastBaseline { .. }
                | Flag::Survey { drops: true, .. }
        )
    }

    pub fn describe(&self) -> String {
        match self {
            Flag::ZeroPasses => "an all-zero output passes KernelBench's check".into(),
            Flag::ConstantPasses => "a constant output passes KernelBench's check".into(),
            Flag::InputCopyPasses => "a copy of an input passes KernelBench's check".into(),
            Flag::NullPassesKevoCheck { candidate } => {
                let what = match candidate.as_str() {
                    "zero" => "an all-zero output",
                    "const" => "a constant output",
                    "ident" => "a copy of an input",
                    other => other,
                };
                format!("{what} passes kevo's own check of the folder")
            }
            Flag::InputIndependent => "the output does not depend on the input".into(),
            Flag::NotDeterministic => "two runs of the reference disagree".into(),
            Flag::FastBaseline { eager_ms } => format!(
                "the eager baseline takes {:.1} µs, under 10 µs: launch overhead dominates",
                eager_ms * 1e3
            ),
            Flag::WeightIndependent => "the output does not depend on the weights".into(),
            Flag::FlatAxes { axes } => format!("the output is constant along axes {axes:?}"),
            Flag::ApproximateInputs { tensors } => format!(
                "{} drawn from the closest of kevo's generators",
                tensors.join(", ")
            ),
            Flag::NoHeldOutSize => {
                "no constant sets the batch alone: the held-out size is the problem's own size, so nothing is held out".into()
            }
            Flag::Survey { finding, .. } => format!("the survey: {finding}"),
            Flag::FewCheckedElements { elements } => format!(
                "an output has only {elements} elements (under {}): each verification seed checks only these, so a kernel wrong on a few inputs' share of them can pass one seed",
                crate::MIN_CHECKED_ELEMENTS
            ),
        }
    }
}

/// The screen of one problem.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Screen {
    pub flags: Vec<Flag>,
}

impl Screen {
    pub fn dropped(&self) -> bool {
        self.flags.iter().any(Flag::drops)
    }
}

/// One problem of a published screen (one JSON object per line, as in
/// the H200 survey of every Level 1 and 2 problem): what a null candidate
/// passes at KernelBench's 1e-4, and the eager time there.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SurveyEntry {
    /// `level1/19_ReLU.py`.
    pub p: String,
    #[serde(default)]
    pub zero4: bool,
    #[serde(default)]
    pub const4: bool,
    #[serde(default)]
    pub ident4: bool,
    #[serde(default)]
    pub inpindep4: bool,
    #[serde(default = "yes")]
    pub det4: bool,
    #[serde(default)]
    pub ms: Option<f64>,
}

fn yes() -> bool {
    true
}

/// A survey file's entries by problem (`level1/19_ReLU.py`); a line that
/// is not an entry is an error naming it.
pub fn read_survey(text: &str) -> Result<std::collections::BTreeMap<String, SurveyEntry>, String> {
    let mut out = std::collections::BTreeMap::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let e: SurveyEntry =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        out.insert(e.p.clone(), e);
    }
    Ok(out)
}

/// The survey's findings that the probe's screen lacks.
pub fn survey_flags(screen: &Screen, entry: &SurveyEntry) -> Vec<Flag> {
    let has = |f: &Flag| screen.flags.contains(f);
    let mut out = Vec::new();
    let mut add = |found: bool, probe: Flag, finding: &str| {
        if found && !has(&probe) {
            out.push(Flag::Survey {
                finding: finding.to_string(),
                drops: true,
            });
        }
    };
    add(
        entry.zero4,
        Flag::ZeroPasses,
        "an all-zero output passes KernelBench's check",
    );
    add(
        entry.const4,
        Flag::ConstantPasses,
        "a constant output passes KernelBench's check",
    );
    add(
        entry.ident4,
        Flag::InputCopyPasses,
        "a copy of an input passes KernelBench's check",
    );
    add(
        entry.inpindep4,
        Flag::InputIndependent,
        "the output does not depend on the input",
    );
    add(
        !entry.det4,
        Flag::NotDeterministic,
        "two runs of the reference disagree",
    );
    out
}

/// A fit below this is reported as an approximation.
const GOOD_FIT: f64 = 0.8;

/// Screen a probed problem.
pub fn screen(probe: &Probe) -> Screen {
    let s = &probe.screen;
    let mut flags = Vec::new();
    if s.zero {
        flags.push(Flag::ZeroPasses);
    }
    if s.constant {
        flags.push(Flag::ConstantPasses);
    }
    if s.ident {
        flags.push(Flag::InputCopyPasses);
    }
    for candidate in &s.kevo {
        flags.push(Flag::NullPassesKevoCheck {
            candidate: candidate.clone(),
        });
    }
    if s.inpindep {
        flags.push(Flag::InputIndependent);
    }
    if !s.det {
        flags.push(Flag::NotDeterministic);
    }
    if let Some(ms) = probe.eager_ms.as_ref().and_then(Timing::median_ms)
        && ms < MIN_BASELINE_MS
    {
        flags.push(Flag::FastBaseline { eager_ms: ms });
    }
    if s.wtindep == Some(true) {
        flags.push(Flag::WeightIndependent);
    }
    if !s.flat_axes.is_empty() {
        flags.push(Flag::FlatAxes {
            axes: s.flat_axes.clone(),
        });
    }
    let approximate: Vec<String> = probe
        .inputs
        .iter()
        .filter_map(|i| i.dist.as_ref().map(|d| (i.name.clone(), d.fit())))
        .chain(probe.state.iter().map(|s| (s.name.clone(), s.dist.fit())))
        .filter(|(_, fit)| *fit < GOOD_FIT)
        .map(|(name, _)| name)
        .collect();
    if !approximate.is_empty() {
        flags.push(Flag::ApproximateInputs {
            tensors: approximate,
        });
    }
    if probe
        .sizes
        .get("held_out")
        .is_none_or(|s| s.error.is_some())
    {
        flags.push(Flag::NoHeldOutSize);
    }
    if let Some(full) = probe.sizes.get("full") {
        let elements = crate::fewest_output_elements(full);
        if elements < crate::MIN_CHECKED_ELEMENTS {
            flags.push(Flag::FewCheckedElements { elements });
        }
    }
    Screen { flags }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_survey_adds_what_the_probe_missed_and_nothing_twice() {
        let survey = read_survey(
            "{\"p\": \"level1/19_ReLU.py\", \"ident4\": true, \"zero4\": true, \"ms\": 3.0}\n\n{\"p\": \"level1/21_Sigmoid.py\"}\n",
        )
        .unwrap();
        assert_eq!(survey.len(), 2);
        let probed = Screen {
            flags: vec![Flag::ZeroPasses],
        };
        let added = survey_flags(&probed, &survey["level1/19_ReLU.py"]);
        assert_eq!(added.len(), 1, "{added:?}");
        assert!(added[0].drops());
        assert!(added[0].describe().contains("copy of an input"));
        assert!(survey_flags(&probed, &survey["level1/21_Sigmoid.py"]).is_empty());
        assert!(read_survey("{\"p\": 3}").unwrap_err().starts_with("line 1"));
    }
}

//! What `kevo tune` shows while it runs: the run it starts, then a
//! progress bar over the configurations (neither under `--json`).

use indicatif::{ProgressBar, ProgressStyle};
use kevo_evolve::tuning::{Started, TrialRow, TuneObserver};

/// The session's observer: prints the header and drives the bar.
pub(super) struct Progress {
    json: bool,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub(super) fn new(json: bool) -> Self {
        Progress { json, bar: None }
    }
}

impl TuneObserver for Progress {
    /// "tune saxpy on ... : 2 parameters, 12 of 16 configurations valid;
    /// strategy tpe, budget 32; run ...", after how the worker is confined.
    fn started(&mut self, s: &Started<'_>) {
        if self.json {
            return;
        }
        // How the worker is confined: a diagnostic, on standard error.
        eprintln!("sandbox: {}", s.sandbox.summary());
        println!(
            "tune {} on {} ({}), sizes {}: {} parameters, {} of {} configurations valid; \
             strategy {}, budget {}{}; run {}",
            s.task.name(),
            s.device.name,
            s.device.backend,
            s.size_set,
            s.space.parameters().len(),
            s.space.valid().len(),
            s.space.total(),
            s.strategy,
            s.budget.evaluations.unwrap_or(0),
            s.budget
                .seconds
                .map(|s| format!(" or {s} s"))
                .unwrap_or_default(),
            s.run,
        );
    }

    fn search_started(&mut self, planned: u64) {
        if self.json {
            return;
        }
        let bar = ProgressBar::new(planned);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {msg}")
                .expect("a valid template"),
        );
        self.bar = Some(bar);
    }

    fn trial(&mut self, _trial: &TrialRow, best: Option<f64>) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(match best {
                Some(s) => format!("best {s:.4}"),
                None => "no correct configuration yet".into(),
            });
        }
    }

    /// The bar cleared, once the search is over.
    fn search_finished(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

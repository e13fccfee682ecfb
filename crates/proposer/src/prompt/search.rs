//! How the search keeps kernels, as the prompt tells it: a model that
//! answers a MAP-Elites or islands search without knowing its rule keeps
//! proposing faster versions of one kind of kernel, and the archive stays
//! at 2 of 64 cells. (1+1) needs no such section: its one rule, beat the
//! incumbent, is the instruction itself.

use kevo_backend::{DeviceKind, Dialect};
use kevo_strategy::{Archive, Axis, Descriptors, Selection};
use serde::Serialize;

/// The search's population and rule, for strategies that keep more than
/// one kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchBrief {
    /// "map_elites" or "islands": which rule the template words.
    pub strategy: &'static str,
    /// How this prompt's parent was chosen, in words.
    pub parent_chosen: String,
    /// The kinds held (MAP-Elites) or the islands' best (islands), best
    /// first.
    pub held: Vec<HeldKernel>,
    /// Cells of the grid, or islands.
    pub slots: usize,
    /// The best score so far, to four places.
    pub best_score: String,
}

/// One kernel the search holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldKernel {
    /// Its kind in words ("vectorised access, the seed's algorithm, no
    /// coordination") or its island ("island 2, 3 members").
    pub label: String,
    pub score: String,
    /// It is this prompt's parent.
    pub is_parent: bool,
}

/// The most kinds listed: the grid has 64, and a long list costs tokens
/// that the elites' sources need more.
const HELD_SHOWN: usize = 12;

impl SearchBrief {
    /// The brief for a search holding `archive` that chose `selection`;
    /// None for (1+1).
    pub fn of(archive: &Archive, selection: &Selection) -> Option<SearchBrief> {
        let parent_chosen = parent_chosen(&selection.how);
        match archive {
            Archive::Incumbent(_) => None,
            Archive::Grid(cells) => {
                let mut cells = cells.clone();
                cells.sort_by(|a, b| b.elite.score.total_cmp(&a.elite.score));
                let best = cells.first().map_or(0.0, |c| c.elite.score);
                Some(SearchBrief {
                    strategy: "map_elites",
                    parent_chosen,
                    held: cells
                        .iter()
                        .take(HELD_SHOWN)
                        .map(|c| HeldKernel {
                            label: kind_words(&c.cell),
                            score: format!("{:.4}", c.elite.score),
                            is_parent: c.elite.id == selection.parent,
                        })
                        .collect(),
                    slots: Descriptors::grid().count(),
                    best_score: format!("{best:.4}"),
                })
            }
            Archive::Islands(islands) => {
                let best = islands
                    .iter()
                    .filter_map(|m| m.first())
                    .map(|e| e.score)
                    .fold(f64::NEG_INFINITY, f64::max);
                Some(SearchBrief {
                    strategy: "islands",
                    parent_chosen,
                    held: islands
                        .iter()
                        .enumerate()
                        .filter_map(|(i, members)| {
                            let first = members.first()?;
                            Some(HeldKernel {
                                label: format!("island {i}, {} members", members.len()),
                                score: format!("{:.4}", first.score),
                                is_parent: members.iter().any(|m| m.id == selection.parent),
                            })
                        })
                        .collect(),
                    slots: islands.len(),
                    best_score: format!("{best:.4}"),
                })
            }
        }
    }
}

/// A strategy's hint in words: the suggestion and why it is made, or what
/// children did where they did worse. None for a suggestion the device
/// makes pointless (see [`kevo_strategy::Axis::suits`]).
pub fn hint_text(
    hint: &kevo_strategy::Hint,
    dialect: Dialect,
    kind: Option<DeviceKind>,
) -> Option<String> {
    use kevo_strategy::HintReason;
    let level = hint.axis.level_name(hint.level);
    let why = match hint.reason {
        HintReason::Worse { .. } => {
            return Some(format!(
                "Children of kernels like this one that moved to {level} did worse \
                 (slower or incorrect)."
            ));
        }
        HintReason::Improved { gradient } if gradient > 0.0 => {
            format!("children of kernels like this one improved when they moved to {level}")
        }
        // A hint stored with a signed sum: it cannot say which way improved.
        HintReason::Improved { .. } => return None,
        HintReason::Unexplored => format!(
            "no kernel of the search uses {level} together with this one's other traits yet"
        ),
    };
    let suggestion = hint.axis.suggestion(hint.level, dialect, kind)?;
    Some(format!("{suggestion} ({why})."))
}

/// A cell in words: one level name per axis.
pub fn kind_words(cell: &Descriptors) -> String {
    Axis::ALL
        .iter()
        .map(|a| a.level_name(cell.level(*a)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A selection rule's name in words.
fn parent_chosen(how: &str) -> String {
    match how {
        "uniform" => "at random among the kinds held".into(),
        "fitness" => "by score (faster kernels are chosen more often)".into(),
        "curiosity" => {
            "for curiosity (kinds whose children were often kept are chosen more often)".into()
        }
        "island" => "in turn by island".into(),
        "island best" => "as the best of its island".into(),
        "island member" => "at random among its island's members".into(),
        other => format!("by the rule `{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevo_strategy::{CellElite, Elite};

    fn selection(parent: i64, how: &str) -> Selection {
        Selection {
            parent,
            island: None,
            cell: None,
            elites: vec![],
            inspirations: vec![],
            hints: vec![],
            previous: None,
            how: how.into(),
        }
    }

    #[test]
    fn an_archive_is_listed_best_first_in_words_with_its_parent_marked() {
        let cell = |m, a, c, id, score| CellElite {
            cell: Descriptors::new(m, a, c),
            elite: Elite { id, score },
            island: 0,
        };
        let archive = Archive::Grid(vec![cell(0, 0, 0, 1, 0.2), cell(1, 0, 0, 5, 0.9)]);
        let b = SearchBrief::of(&archive, &selection(1, "curiosity")).unwrap();
        assert_eq!(b.strategy, "map_elites");
        assert_eq!(b.slots, 64);
        assert_eq!(b.best_score, "0.9000");
        let words = [Axis::Memory, Axis::Algorithm, Axis::Coordination]
            .map(|a| a.level_name(u8::from(a == Axis::Memory)))
            .join(", ");
        assert_eq!(b.held[0].label, words);
        assert_eq!(
            b.held.iter().map(|h| h.is_parent).collect::<Vec<_>>(),
            [false, true]
        );
        assert!(b.parent_chosen.starts_with("for curiosity"));
    }

    #[test]
    fn islands_list_each_islands_best_and_one_plus_one_has_no_brief() {
        let e = |id, score| Elite { id, score };
        let archive = Archive::Islands(vec![vec![e(3, 0.5), e(1, 0.2)], vec![e(4, 0.7)]]);
        let b = SearchBrief::of(&archive, &selection(1, "island member")).unwrap();
        assert_eq!(b.held[0].label, "island 0, 2 members");
        assert!(b.held[0].is_parent && !b.held[1].is_parent);
        assert_eq!(b.best_score, "0.7000");
        assert_eq!(
            SearchBrief::of(&Archive::Incumbent(e(1, 0.2)), &selection(1, "incumbent")),
            None
        );
    }
}

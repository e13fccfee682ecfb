//! `EVOLVE-BLOCK` regions, enforced rather than merely suggested.
//!
//! A source may mark the parts a proposer may change:
//!
//! ```text
//! // EVOLVE-BLOCK-START
//! ... free to change ...
//! // EVOLVE-BLOCK-END
//! ```
//!
//! A marker is any line containing `EVOLVE-BLOCK-START` or
//! `EVOLVE-BLOCK-END`; regions do not nest. When the parent has regions, a
//! child must keep the same number of regions and every line outside them
//! (marker lines included) unchanged. Lines are compared without trailing
//! whitespace and line-ending differences, which a model cannot see.

const START: &str = "EVOLVE-BLOCK-START";
const END: &str = "EVOLVE-BLOCK-END";

/// Does `source` declare any region?
pub fn has_regions(source: &str) -> bool {
    source.lines().any(|l| l.contains(START) || l.contains(END))
}

/// The text outside the regions, as `regions + 1` groups of (1-based line
/// number, line) pairs: before the first region, between regions, after
/// the last. Errors name the line of an unbalanced marker.
fn fixed_parts(source: &str) -> Result<Vec<Vec<(usize, &str)>>, String> {
    let mut parts = vec![Vec::new()];
    let mut inside = false;
    for (i, raw) in source.lines().enumerate() {
        let line = raw.trim_end();
        let n = i + 1;
        if line.contains(START) {
            if inside {
                return Err(format!(
                    "line {n}: `{START}` inside a region (regions do not nest)"
                ));
            }
            parts.last_mut().expect("non-empty").push((n, line));
            inside = true;
        } else if line.contains(END) {
            if !inside {
                return Err(format!("line {n}: `{END}` without a `{START}` before it"));
            }
            inside = false;
            parts.push(vec![(n, line)]);
        } else if !inside {
            parts.last_mut().expect("non-empty").push((n, line));
        }
    }
    if inside {
        return Err(format!("`{START}` is never closed by `{END}`"));
    }
    Ok(parts)
}

/// Check that `child` only changed `parent` inside its regions. `Ok` when
/// the parent has none. The error says what changed, for the proposer.
pub fn check(parent: &str, child: &str) -> Result<(), String> {
    if !has_regions(parent) {
        return Ok(());
    }
    let p = fixed_parts(parent)
        .map_err(|e| format!("the parent's EVOLVE-BLOCK markers are broken: {e}"))?;
    let c = fixed_parts(child).map_err(|e| format!("EVOLVE-BLOCK markers broken: {e}"))?;
    if p.len() != c.len() {
        return Err(format!(
            "the parent has {} EVOLVE-BLOCK region(s), the candidate {}; keep every marker line",
            p.len() - 1,
            c.len() - 1
        ));
    }
    for (k, (pp, cp)) in p.iter().zip(&c).enumerate() {
        let where_ = match k {
            0 => "before the first EVOLVE-BLOCK region".to_string(),
            k if k == p.len() - 1 => "after the last EVOLVE-BLOCK region".to_string(),
            k => format!("between EVOLVE-BLOCK regions {k} and {}", k + 1),
        };
        for j in 0..pp.len().max(cp.len()) {
            match (pp.get(j), cp.get(j)) {
                (Some((_, a)), Some((_, b))) if a == b => {}
                (Some((pn, a)), Some((cn, b))) => {
                    return Err(format!(
                        "text {where_} changed: parent line {pn} `{a}` became candidate line {cn} `{b}`"
                    ));
                }
                (Some((pn, a)), None) => {
                    return Err(format!(
                        "text {where_} changed: parent line {pn} `{a}` was removed"
                    ));
                }
                (None, Some((cn, b))) => {
                    return Err(format!(
                        "text {where_} changed: candidate line {cn} `{b}` was added"
                    ));
                }
                (None, None) => unreachable!(),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "#define N 4\n// EVOLVE-BLOCK-START\nint f() { return 1; }\n// EVOLVE-BLOCK-END\nint g();\n/* EVOLVE-BLOCK-START */\nx\n/* EVOLVE-BLOCK-END */\n";

    #[test]
    fn changes_inside_regions_pass() {
        let child = PARENT
            .replace("int f() { return 1; }", "int f() {\n  return 2;\n}")
            .replace("\nx\n", "\ny\nz\n");
        assert_eq!(check(PARENT, &child), Ok(()));
        // Trailing whitespace and CRLF do not count.
        assert_eq!(check(PARENT, &PARENT.replace('\n', "  \r\n")), Ok(()));
        // No regions: anything goes.
        assert_eq!(check("a\nb", "c"), Ok(()));
    }

    #[test]
    fn changes_outside_are_named() {
        let e = check(PARENT, &PARENT.replace("#define N 4", "#define N 8")).unwrap_err();
        assert!(
            e.contains("before the first") && e.contains("#define N 8"),
            "{e}"
        );
        let e = check(PARENT, &PARENT.replace("int g();\n", "")).unwrap_err();
        assert!(
            e.contains("between EVOLVE-BLOCK regions 1 and 2") && e.contains("`int g();`"),
            "{e}"
        );
        let e = check(PARENT, &format!("{PARENT}int h;\n")).unwrap_err();
        assert!(e.contains("after the last") && e.contains("added"), "{e}");
        let e = check(
            PARENT,
            &PARENT.replace("/* EVOLVE-BLOCK-START */\nx\n/* EVOLVE-BLOCK-END */\n", ""),
        )
        .unwrap_err();
        assert!(
            e.contains("2 EVOLVE-BLOCK region(s), the candidate 1"),
            "{e}"
        );
        let e = check(PARENT, &PARENT.replace("// EVOLVE-BLOCK-END\n", "")).unwrap_err();
        assert!(e.contains("nest"), "{e}");
    }

    #[test]
    fn broken_parents_are_reported() {
        let e = check("// EVOLVE-BLOCK-START\nx\n", "y").unwrap_err();
        assert!(e.contains("parent") && e.contains("never closed"), "{e}");
        let e = check("x\n// EVOLVE-BLOCK-END\n", "y").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
    }
}

use super::*;

const TEMPLATE: &str = "\
// a tunable saxpy
// kevo: tune BLOCK 64 128 256 512 1024
// kevo: tune UNROLL 1 2 4
// kevo: require BLOCK * UNROLL <= 1024
// kevo: block BLOCK
__kernel void saxpy(__global float* y, uint N) {
    #pragma unroll UNROLL
    for (int k = 0; k < 4; k++) {}
}
";

fn space(source: &str) -> TuningSpace {
    TuningSpace::parse(source).unwrap().expect("a template")
}

fn error(source: &str) -> DeclarationError {
    TuningSpace::parse(source).unwrap_err()
}

#[test]
fn parses_parameters_and_filters_by_the_constraints() {
    let s = space(TEMPLATE);
    assert_eq!(s.parameters().len(), 2);
    assert_eq!(s.parameters()[0].values, vec![64, 128, 256, 512, 1024]);
    assert_eq!(s.parameters()[1].line, 3);
    assert_eq!(s.requirements()[0].line, 4);
    assert_eq!(s.total(), 15);
    // 1024 x {2, 4} and 512 x 4 break BLOCK * UNROLL <= 1024.
    assert_eq!(s.valid().len(), 12);
    for c in s.valid() {
        let v = s.values(c);
        assert!(v[0] * v[1] <= 1024, "{}", s.describe(c));
    }
    assert!(!s.is_valid(&Configuration(vec![4, 1])));
    assert!(
        !s.is_valid(&Configuration(vec![5, 0])),
        "index out of range"
    );
    assert!(!s.is_valid(&Configuration(vec![0])), "too few indices");
    // Odometer order: the last parameter turns fastest.
    assert_eq!(s.valid()[0], Configuration(vec![0, 0]));
    assert_eq!(s.valid()[1], Configuration(vec![0, 1]));
}

#[test]
fn an_ordinary_kernel_is_not_a_template() {
    assert!(
        TuningSpace::parse("// kevo: block 128\n__kernel void f() {}\n")
            .unwrap()
            .is_none()
    );
    assert!(!is_template("// kevo: block 128\n"));
    assert!(is_template(TEMPLATE));
}

#[test]
fn instantiation_defines_the_values_and_keeps_line_numbers() {
    let s = space(TEMPLATE);
    let c = s
        .configuration(&[("UNROLL".into(), 2), ("BLOCK".into(), 256)])
        .unwrap();
    let kernel = s.instantiate(TEMPLATE, &c);
    let (head, body) = kernel.split_once("#line 1\n").unwrap();
    assert_eq!(
        head,
        "// kevo configuration: BLOCK=256 UNROLL=2\n#define BLOCK 256\n#define UNROLL 2\n"
    );
    // The body has the template's lines, one for one.
    assert_eq!(body.lines().count(), TEMPLATE.lines().count());
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines[1], "// tuned: BLOCK = 256 (of 64 128 256 512 1024)");
    assert_eq!(lines[3], "// required: BLOCK * UNROLL <= 1024");
    assert_eq!(lines[4], "// kevo: block 256");
    assert_eq!(
        lines[6], "    #pragma unroll UNROLL",
        "macros stay macros in code"
    );
    assert!(!is_template(&kernel), "an instance is an ordinary kernel");
    assert!(TuningSpace::parse(&kernel).unwrap().is_none());
}

#[test]
fn block_shapes_and_kernel_specific_blocks_take_values() {
    let src = "// kevo: tune BX 8 16\n// kevo: tune BY 4 8\n// kevo: block BX*BY\r\n\
               // kevo: block step BY*2\nkernel\n";
    let s = space(src);
    let c = s
        .configuration(&[("BX".into(), 16), ("BY".into(), 4)])
        .unwrap();
    let k = s.instantiate(src, &c);
    assert!(k.contains("// kevo: block 16*4\r\n"), "{k}");
    assert!(k.contains("// kevo: block step 4*2\n"), "{k}");
}

#[test]
fn guarded_defaults_are_allowed_and_bare_definitions_refused() {
    let guarded = "// kevo: tune TILE 8 16\n#ifndef TILE\n#define TILE 8\n#endif\nx TILE\n";
    assert!(TuningSpace::parse(guarded).unwrap().is_some());
    let guarded = "// kevo: tune TILE 8 16\n#if !defined(TILE)\n#  define TILE 8\n#endif\n";
    assert!(TuningSpace::parse(guarded).unwrap().is_some());
    let e = error("// kevo: tune TILE 8 16\n\n#define TILE 8\n");
    assert_eq!(e.line, 3);
    assert!(e.reason.contains("kevo defines it"), "{e}");
}

#[test]
fn bad_declarations_are_errors_naming_the_line() {
    for (src, line, needle) in [
        ("x T\n// kevo: tune T\n", 2, "`T` has no values"),
        ("// kevo: tune\n", 1, "expected `// kevo: tune NAME"),
        ("// kevo: tune 9T 1 2\n", 1, "not a C identifier"),
        ("// kevo: tune T 1 two\nT\n", 1, "`two` is not an integer"),
        ("// kevo: tune T 1 2 1\nT\n", 1, "listed twice"),
        (
            "T\n// kevo: tune T 1\n// kevo: tune T 2\n",
            3,
            "already declared on line 2",
        ),
        (
            "T\n// kevo: tune T 1 2\n// kevo: require Q < 2\n",
            3,
            "unknown name `Q` (the tuned parameters are T)",
        ),
        ("// kevo: require 1 < 2\n", 1, "without any `// kevo: tune`"),
        (
            "T\n// kevo: tune T 1 2\n// kevo: require T > 5\n",
            3,
            "no configuration meets the constraints (lines 3): 2 were tried",
        ),
        (
            "// kevo: tune T 1 2\n// kevo: block TxT\nT\n",
            2,
            "`TxT` in the block shape is not a tuned parameter",
        ),
        (
            "// kevo: tune T 1 2\n// kevo: tune U 1 2\nU\n",
            1,
            "never uses it",
        ),
        (
            "T\n// kevo: require T <\n// kevo: tune T 1\n",
            2,
            "ends too early",
        ),
    ] {
        let e = error(src);
        assert_eq!(e.line, line, "{src:?}: {e}");
        assert!(e.to_string().contains(needle), "{src:?}: {e}");
        assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
    }
}

#[test]
fn a_space_too_large_to_enumerate_is_refused() {
    let mut src = String::new();
    for p in ["A", "B", "C", "D"] {
        src.push_str(&format!("// kevo: tune {p}"));
        for v in 0..40 {
            src.push_str(&format!(" {v}"));
        }
        src.push_str(&format!("\n{p}\n"));
    }
    let e = error(&src);
    assert!(e.reason.contains("2560000 configurations"), "{e}");
}

#[test]
fn configurations_by_value_name_what_is_wrong() {
    let s = space(TEMPLATE);
    for (assign, needle) in [
        (vec![("BLOCK", 64)], "no value for UNROLL"),
        (
            vec![("BLOCK", 63), ("UNROLL", 1)],
            "63 is not a value of `BLOCK`",
        ),
        (vec![("X", 1)], "`X` is not a tuned parameter"),
        (vec![("BLOCK", 64), ("BLOCK", 64)], "given twice"),
        (
            vec![("BLOCK", 1024), ("UNROLL", 4)],
            "breaks line 4: BLOCK * UNROLL <= 1024",
        ),
    ] {
        let a: Vec<(String, i64)> = assign.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let e = s.configuration(&a).unwrap_err();
        assert!(e.contains(needle), "{assign:?}: {e}");
    }
}

#[test]
fn neighbours_step_one_value_and_stay_valid() {
    let s = space(TEMPLATE);
    let c = s
        .configuration(&[("BLOCK".into(), 512), ("UNROLL".into(), 1)])
        .unwrap();
    let n: Vec<String> = s.neighbours(&c).iter().map(|c| s.describe(c)).collect();
    // 1024 x 1 is valid, 512 x 2 is valid, 256 x 1 is valid; UNROLL has no lower value.
    assert_eq!(
        n,
        vec![
            "BLOCK=256 UNROLL=1",
            "BLOCK=1024 UNROLL=1",
            "BLOCK=512 UNROLL=2"
        ]
    );
}

#[test]
fn integers_take_hex_signs_and_separators() {
    assert_eq!(parse_integer("1_024"), Some(1024));
    assert_eq!(parse_integer("0x40"), Some(64));
    assert_eq!(parse_integer("-3"), Some(-3));
    assert_eq!(parse_integer("3.5"), None);
    assert_eq!(parse_integer(""), None);
}

#[test]
fn annotations_are_comments_ahead_of_the_line_directive() {
    let s = space(TEMPLATE);
    let c = s.valid()[0].clone();
    let plain = s.instantiate(TEMPLATE, &c);
    let noted = s.instantiate_annotated(TEMPLATE, &c, "tried 2:\n  BLOCK=64 UNROLL=1  score 0.5");
    let lines: Vec<&str> = noted.lines().collect();
    assert_eq!(lines[0], plain.lines().next().unwrap());
    assert_eq!(lines[1], "// tried 2:");
    assert_eq!(lines[2], "//   BLOCK=64 UNROLL=1  score 0.5");
    assert_eq!(
        noted.split_once("#line 1\n").unwrap().1,
        plain.split_once("#line 1\n").unwrap().1
    );
}

#[test]
fn notes_cannot_splice_the_definitions_into_a_comment() {
    let s = space(TEMPLATE);
    let c = s.valid()[0].clone();
    let plain = s.instantiate(TEMPLATE, &c);
    // A compiler message quoting `#error x \`, a trigraph and a lone CR.
    let noted = s.instantiate_annotated(TEMPLATE, &c, "error: x \\\nbad ??/\nthen\r\u{1b}[2J");
    for line in noted.lines().take(4) {
        assert!(
            !line.contains('\\') && !line.contains("??") && !line.contains('\r'),
            "{line:?}"
        );
    }
    // The definitions and the body are those of the plain instance.
    let body = |k: &str| {
        k.split_once("// then")
            .map_or(String::new(), |(_, b)| b.to_string())
    };
    assert!(
        body(&noted).ends_with(plain.split_once('\n').unwrap().1),
        "{noted}"
    );
    assert!(noted.contains("\n#define BLOCK "), "{noted}");
}

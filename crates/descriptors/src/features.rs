//! What one source does, found by pattern matching on its tokens; the
//! descriptors compare a candidate's features with its seed's.

use std::collections::BTreeSet;

use kevo_backend::Dialect;

use crate::lex::{Lexed, Token, lex};

/// Where a pattern was first seen: the construct and its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub pattern: String,
    pub line: u32,
}

/// A `for`, `while` or `do` loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    pub line: u32,
    /// Loops whose bodies enclose this one.
    pub depth: u32,
    /// Its body holds a barrier: it steps through tiles or a tree, so it
    /// counts for the memory or coordination axis, not the algorithm.
    pub has_barrier: bool,
    /// Its body holds a warp/sub-group primitive (a shuffle reduction).
    pub has_warp_primitive: bool,
    /// The counter doubles or halves (`<<=`, `>>=`, `*= 2`, `/= 2`).
    pub logarithmic: bool,
    /// The condition names no variable but the loop's own counters (and
    /// compile-time constants): an unrollable loop, not a loop over data.
    pub constant_trip: bool,
    /// It finishes what a wider path left over (the elements after a
    /// vectorised or unrolled main loop) and holds no loop: part of that
    /// access, not another loop of the algorithm nor a deeper nest.
    pub remainder: bool,
    /// Token index of its keyword.
    pub(crate) start: usize,
    /// Token indices of its header (the parenthesised part), [start, end).
    pub(crate) header: (usize, usize),
    /// Token indices of its body, [start, end).
    pub(crate) extent: (usize, usize),
}

/// The constructs of one kernel source that the descriptors are built on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// A wide access the kernel chose: `vload`/`vstore`, `as_T`, CUDA's
    /// cache-hinted loads, vector PTX, or a cast to a pointer to a vector
    /// type (`(float4*)x`). A vector local or literal is arithmetic, and
    /// loading a `float4` buffer's own elements is the buffer's type.
    pub vector_access: Option<Seen>,
    /// Pointers to vector types in top-level parameter lists (`float4*`
    /// buffers): the task's element types, a choice only where the seed's
    /// signature has scalars.
    pub signature_vectors: Vec<Seen>,
    pub tiling: Option<Seen>,
    /// Arrays declared in function bodies without an address space
    /// (per-thread arrays, in registers), in order.
    pub register_arrays: Vec<Seen>,
    pub async_copy: Option<Seen>,
    pub barrier: Option<Seen>,
    pub warp_primitive: Option<Seen>,
    pub global_coordination: Option<Seen>,
    pub loops: Vec<Loop>,
    /// Math builtins called, normalised (`expf`, `__expf` and
    /// `native_exp` are all `exp`).
    pub math: BTreeSet<String>,
    /// Floating-point precisions used: "half", "bfloat16", "float", "double".
    pub precisions: BTreeSet<&'static str>,
    /// Program-scope constant arrays (lookup tables).
    pub tables: usize,
    /// Token indices of the explicit vector accesses.
    vector_sites: Vec<usize>,
}

impl Features {
    pub fn of(source: &str, dialect: Dialect) -> Features {
        let lexed = lex(source);
        let mut f = Features::default();
        scan_tokens(&lexed, dialect, &mut f);
        scan_strings(&lexed, dialect, &mut f);
        f.loops = loops(&lexed.tokens, dialect, &f.vector_sites);
        f
    }

    /// A tree reduction: a doubling or halving loop with a barrier in it.
    pub fn tree_reduction(&self) -> Option<u32> {
        self.loops
            .iter()
            .find(|l| l.logarithmic && l.has_barrier)
            .map(|l| l.line)
    }

    /// Loops the algorithm axis counts: no barrier or warp primitive
    /// inside (tile, tree and shuffle loops are the memory and
    /// coordination axes' work) and no remainder of a wider path (the
    /// memory axis's).
    pub fn algorithmic_loops(&self) -> impl Iterator<Item = &Loop> {
        self.loops
            .iter()
            .filter(|l| !l.coordinates() && !l.remainder)
    }

    /// The deepest nest of loops over data (loops that are neither
    /// constant-trip nor the remainder of a wider path). A loop that holds
    /// a barrier or a warp primitive counts as one level together with
    /// every loop inside it: tiling and warp sharing restructure one pass
    /// over the data without deepening it. (Any loop around such a loop
    /// holds its barrier too.)
    pub fn data_loop_depth(&self) -> u32 {
        let data: Vec<&Loop> = self
            .loops
            .iter()
            .filter(|l| !l.constant_trip && !l.remainder)
            .collect();
        data.iter()
            .map(|l| {
                if self
                    .loops
                    .iter()
                    .any(|o| o.coordinates() && (o.encloses(l) || *o == **l))
                {
                    1
                } else {
                    data.iter().filter(|o| o.encloses(l)).count() as u32 + 1
                }
            })
            .max()
            .unwrap_or(0)
    }

    /// Doubling/halving loops that are neither a barrier tree nor a
    /// shuffle reduction: a logarithmic algorithm.
    pub fn logarithmic_loops(&self) -> usize {
        self.algorithmic_loops().filter(|l| l.logarithmic).count()
    }
}

impl Loop {
    /// Holds a barrier or warp primitive somewhere in its body.
    pub fn coordinates(&self) -> bool {
        self.has_barrier || self.has_warp_primitive
    }

    fn encloses(&self, other: &Loop) -> bool {
        self.extent != other.extent
            && self.extent.0 <= other.extent.0
            && other.extent.1 <= self.extent.1
    }
}

fn seen(t: &Token) -> Seen {
    Seen {
        pattern: t.text.clone(),
        line: t.line,
    }
}

fn note(slot: &mut Option<Seen>, t: &Token) {
    if slot.is_none() {
        *slot = Some(seen(t));
    }
}

const SCALARS: [&str; 13] = [
    "float",
    "double",
    "half",
    "int",
    "uint",
    "short",
    "ushort",
    "char",
    "uchar",
    "long",
    "ulong",
    "longlong",
    "ulonglong",
];

/// `float4`, `int2`, `half8`...: a scalar name followed by a lane count.
fn is_vector_type(name: &str, widths: &[&str]) -> bool {
    let name = name
        .strip_prefix("packed_")
        .or_else(|| name.strip_prefix("__"))
        .unwrap_or(name);
    SCALARS.iter().any(|s| {
        name.strip_prefix(s)
            .is_some_and(|rest| widths.contains(&rest))
    }) || matches!(name, "nv_bfloat162")
}

/// The lane counts of a dialect's vector types (Triton has none).
fn vector_widths(dialect: Dialect) -> &'static [&'static str] {
    match dialect {
        Dialect::Cuda => &["2", "4"],
        Dialect::OpenCl => &["2", "3", "4", "8", "16"],
        Dialect::Metal => &["2", "3", "4"],
        Dialect::Triton => &[],
    }
}

/// Builtins that load or store several lanes at once, or reinterpret
/// them; vector types are judged where they are used (see [`pointee`]).
fn is_explicit_vector_access(t: &str, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Cuda => matches!(
            t,
            "__ldg"
                | "__ldca"
                | "__ldcg"
                | "__ldcs"
                | "__ldlu"
                | "__ldcv"
                | "__stwb"
                | "__stcg"
                | "__stcs"
                | "__stwt"
        ),
        Dialect::OpenCl => {
            t.strip_prefix("as_")
                .is_some_and(|r| is_vector_type(r, vector_widths(dialect)))
                || t.starts_with("vload")
                || t.starts_with("vstore")
        }
        Dialect::Metal => false,
        // Every Triton access is a block; these hint or shape its layout.
        Dialect::Triton => matches!(
            t,
            "make_block_ptr" | "multiple_of" | "max_contiguous" | "reshape" | "join" | "split"
        ),
    }
}

/// How a vector type at token `i` is used as a pointee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pointee {
    /// `T*` followed by `)` or `>`: a cast or a template argument
    /// (`(float4*)x`, `reinterpret_cast<const float4*>(x)`).
    Cast,
    /// `T* name`: a declaration (a parameter, a local pointer).
    Declared,
}

/// The use of the type at token `i` as a pointee, if it is one.
fn pointee(tokens: &[Token], i: usize) -> Option<Pointee> {
    let qualifier = |t: &Token| {
        matches!(
            t.text.as_str(),
            "const" | "volatile" | "restrict" | "__restrict" | "__restrict__"
        )
    };
    let mut k = i + 1;
    while tokens.get(k).is_some_and(qualifier) {
        k += 1;
    }
    if !tokens.get(k)?.is("*") {
        return None;
    }
    while tokens.get(k).is_some_and(|t| t.is("*") || qualifier(t)) {
        k += 1;
    }
    match tokens.get(k) {
        Some(t) if t.is(")") || t.is(">") => Some(Pointee::Cast),
        _ => Some(Pointee::Declared),
    }
}

fn is_tiling_qualifier(t: &str, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Cuda => t == "__shared__",
        Dialect::OpenCl => matches!(t, "__local" | "local"),
        Dialect::Metal => t == "threadgroup",
        // Triton stages `tl.dot` operands through shared memory itself.
        Dialect::Triton => t == "dot",
    }
}

fn is_constant_qualifier(t: &str, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Cuda => t == "__constant__",
        Dialect::OpenCl => matches!(t, "__constant" | "constant"),
        Dialect::Metal => t == "constant",
        Dialect::Triton => t == "constexpr",
    }
}

fn is_async_copy(t: &str, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Cuda => {
            matches!(
                t,
                "__pipeline_memcpy_async"
                    | "memcpy_async"
                    | "__pipeline_commit"
                    | "__pipeline_wait_prior"
            ) || t.starts_with("__prefetch")
        }
        Dialect::OpenCl => matches!(
            t,
            "async_work_group_copy"
                | "async_work_group_strided_copy"
                | "wait_group_events"
                | "prefetch"
        ),
        Dialect::Metal => t == "simdgroup_async_copy",
        // Tensor-memory-accelerator descriptors copy asynchronously.
        Dialect::Triton => matches!(t, "make_tensor_descriptor" | "load_tensor_descriptor"),
    }
}

pub(crate) fn is_barrier(t: &str, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Cuda => matches!(
            t,
            "__syncthreads"
                | "__syncthreads_count"
                | "__syncthreads_and"
                | "__syncthreads_or"
                | "__barrier_sync"
        ),
        Dialect::OpenCl => matches!(t, "barrier" | "work_group_barrier"),
        Dialect::Metal => t == "threadgroup_barrier",
        Dialect::Triton => t == "debug_barrier",
    }
}

pub(crate) fn is_warp_primitive(t: &str, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Cuda => {
            ["__shfl", "__ballot", "__match_", "__reduce_"]
                .iter()
                .any(|p| t.starts_with(p))
                || matches!(
                    t,
                    "__any_sync"
                        | "__all_sync"
                        | "__uni_sync"
                        | "__syncwarp"
                        | "__activemask"
                        | "tiled_partition"
                        | "coalesced_threads"
                )
        }
        Dialect::OpenCl => {
            (t.starts_with("sub_group_") || t.starts_with("intel_sub_group_"))
                || (t.starts_with("work_group_") && t != "work_group_barrier")
        }
        Dialect::Metal => t.starts_with("simd_") || t.starts_with("quad_"),
        // Block reductions and scans: Triton lowers them to warp shuffles.
        Dialect::Triton => matches!(
            t,
            "reduce" | "associative_scan" | "cumsum" | "cumprod" | "argmax" | "argmin"
        ),
    }
}

fn is_global_coordination(t: &str, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Cuda => {
            t.starts_with("atomic") || t.starts_with("__threadfence") || t == "this_grid"
        }
        Dialect::OpenCl => t.starts_with("atomic_") || t.starts_with("atom_"),
        Dialect::Metal | Dialect::Triton => t.starts_with("atomic_"),
    }
}

/// Math builtins whose replacement changes how a result is computed
/// (cheap rounding, `fma` and `min`/`max` are left out).
const MATH: [&str; 32] = [
    "sqrt", "rsqrt", "cbrt", "rcbrt", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10",
    "log1p", "sin", "cos", "tan", "sincos", "sinpi", "cospi", "sincospi", "asin", "acos", "atan",
    "atan2", "sinh", "cosh", "tanh", "pow", "pown", "powr", "hypot", "erf", "recip",
];

/// `__expf`, `expf`, `native_exp`, `half_exp` -> "exp".
fn math_builtin(t: &str) -> Option<String> {
    let base = t
        .strip_prefix("__")
        .or_else(|| t.strip_prefix("native_"))
        .or_else(|| t.strip_prefix("half_"))
        .unwrap_or(t);
    if MATH.contains(&base) {
        return Some(base.to_string());
    }
    let without_f = base.strip_suffix('f')?;
    MATH.contains(&without_f).then(|| without_f.to_string())
}

fn precision(t: &str) -> Option<&'static str> {
    let t = t.trim_start_matches('_');
    let scalar = t.trim_end_matches(|c: char| c.is_ascii_digit());
    match scalar {
        "half" => Some("half"),
        "nv_bfloat" | "nv_bfloat16" | "bfloat" | "bfloat16" => Some("bfloat16"),
        "float" => Some("float"),
        "double" => Some("double"),
        _ => None,
    }
}

/// A vector access at token `i`: an explicit one, a cast to a vector
/// pointer, or a vector buffer of a top-level parameter list (`in_params`).
fn scan_vector(tokens: &[Token], i: usize, in_params: bool, dialect: Dialect, f: &mut Features) {
    let t = &tokens[i];
    let explicit = is_explicit_vector_access(&t.text, dialect);
    let pointee = is_vector_type(&t.text, vector_widths(dialect))
        .then(|| pointee(tokens, i))
        .flatten();
    if in_params && pointee.is_some() {
        if !f.signature_vectors.iter().any(|s| s.pattern == t.text) {
            f.signature_vectors.push(seen(t));
        }
    } else if explicit || (!in_params && pointee == Some(Pointee::Cast)) {
        note(&mut f.vector_access, t);
        f.vector_sites.push(i);
    }
}

fn scan_tokens(lexed: &Lexed, dialect: Dialect, f: &mut Features) {
    let tokens = &lexed.tokens;
    let (mut braces, mut parens) = (0i32, 0i32);
    // Index of the current statement's first token.
    let mut statement = 0;
    for (i, t) in tokens.iter().enumerate() {
        match t.text.as_str() {
            "{" => braces += 1,
            "}" => braces -= 1,
            "(" => parens += 1,
            ")" => parens -= 1,
            _ => {}
        }
        if matches!(t.text.as_str(), ";" | "{" | "}") {
            statement = i + 1;
            continue;
        }
        if !t.is_ident() {
            continue;
        }
        let name = t.text.as_str();
        scan_vector(tokens, i, braces == 0 && parens > 0, dialect, f);
        if is_tiling_qualifier(name, dialect) {
            note(&mut f.tiling, t);
        }
        if is_async_copy(name, dialect) {
            note(&mut f.async_copy, t);
        }
        if is_barrier(name, dialect) {
            note(&mut f.barrier, t);
        }
        if is_warp_primitive(name, dialect) {
            note(&mut f.warp_primitive, t);
        }
        if is_global_coordination(name, dialect) {
            note(&mut f.global_coordination, t);
        }
        let called = tokens.get(i + 1).is_some_and(|n| n.is("("));
        if called && let Some(m) = math_builtin(name) {
            f.math.insert(m);
        }
        if let Some(p) = precision(name) {
            f.precisions.insert(p);
        }
        // A declaration `T name[...]`: a register array inside a body, a
        // lookup table at program scope when qualified as constant.
        let declares_array = (SCALARS.contains(&name)
            || is_vector_type(name, &["2", "3", "4", "8", "16"]))
            && tokens.get(i + 1).is_some_and(Token::is_ident)
            && tokens.get(i + 2).is_some_and(|n| n.is("["));
        if declares_array && parens == 0 {
            let qualifiers = &tokens[statement..i];
            let shared = qualifiers
                .iter()
                .any(|q| is_tiling_qualifier(&q.text, dialect));
            let constant = qualifiers
                .iter()
                .any(|q| is_constant_qualifier(&q.text, dialect));
            if braces > 0 && !shared && !constant {
                f.register_arrays.push(seen(&tokens[i + 1]));
            }
            if braces == 0 && constant {
                f.tables += 1;
            }
        }
        // CUDA's cooperative groups: a block's sync is a barrier, a grid's
        // a global one.
        if dialect == Dialect::Cuda && name == "sync" && i >= 1 && tokens[i - 1].is(".") {
            if lexed
                .tokens
                .iter()
                .any(|t| t.is("this_grid") || t.is("grid_group"))
            {
                note(&mut f.global_coordination, t);
            } else {
                note(&mut f.barrier, t);
            }
        }
    }
}

/// Inline assembly (CUDA's PTX in string literals).
fn scan_strings(lexed: &Lexed, dialect: Dialect, f: &mut Features) {
    if dialect != Dialect::Cuda {
        return;
    }
    // Strings carry no line of their own; the first `asm` names it.
    let line = lexed
        .tokens
        .iter()
        .find(|t| t.is("asm") || t.is("__asm__"))
        .map_or(0, |t| t.line);
    // Each PTX instruction's mnemonic: the first word of a statement,
    // after an optional `@p` predicate.
    let mnemonics = lexed.strings.iter().flat_map(|s| {
        s.split([';', '\n', '{', '}'])
            .filter_map(|stmt| {
                let mut words = stmt.split_whitespace();
                let first = words.next()?;
                if first.starts_with('@') {
                    words.next()
                } else {
                    Some(first)
                }
            })
            .map(str::to_string)
            .collect::<Vec<_>>()
    });
    for m in mnemonics {
        let seen = |slot: &mut Option<Seen>, matches: bool| {
            if matches && slot.is_none() {
                *slot = Some(Seen {
                    pattern: m.clone(),
                    line,
                });
            }
        };
        let vector = m.starts_with("ld.") || m.starts_with("st.");
        seen(
            &mut f.async_copy,
            m.starts_with("cp.async") || m.starts_with("prefetch."),
        );
        seen(
            &mut f.vector_access,
            (vector && (m.contains(".v2.") || m.contains(".v4."))) || m.starts_with("ld.global.nc"),
        );
        seen(
            &mut f.barrier,
            m.starts_with("bar.sync") || m.starts_with("barrier.sync"),
        );
        seen(
            &mut f.warp_primitive,
            m.starts_with("shfl.") || m.starts_with("vote.") || m.starts_with("redux."),
        );
        seen(
            &mut f.global_coordination,
            m.starts_with("atom.") || m.starts_with("red."),
        );
    }
}

/// Every loop with its body's extent and what the body holds.
fn loops(tokens: &[Token], dialect: Dialect, vector_sites: &[usize]) -> Vec<Loop> {
    let constants = compile_time_constants(tokens);
    let mut all: Vec<Loop> = Vec::new();
    let mut trailing_whiles = BTreeSet::new();
    for (i, t) in tokens.iter().enumerate() {
        let (header, body) = match t.text.as_str() {
            "for" | "while" if !trailing_whiles.contains(&i) => {
                let Some(close) = matching(tokens, i + 1) else {
                    continue;
                };
                (
                    (i + 2, close),
                    (close + 1, statement_end(tokens, close + 1)),
                )
            }
            "do" => {
                let end = statement_end(tokens, i + 1);
                // `do body while (cond);`: the while is this loop's.
                if tokens.get(end).is_some_and(|w| w.is("while")) {
                    trailing_whiles.insert(end);
                    let close = matching(tokens, end + 1).unwrap_or(end);
                    ((end + 2, close), (i + 1, end))
                } else {
                    ((end, end), (i + 1, end))
                }
            }
            _ => continue,
        };
        let header_tokens = &tokens[header.0.min(header.1)..header.1];
        let body_tokens = &tokens[body.0.min(body.1)..body.1];
        let logarithmic = header_tokens.windows(2).any(|w| {
            w[0].is("<<=") || w[0].is(">>=") || ((w[0].is("*=") || w[0].is("/=")) && w[1].is("2"))
        });
        all.push(Loop {
            line: t.line,
            depth: 0,
            has_barrier: body_tokens.iter().any(|b| is_barrier(&b.text, dialect)),
            has_warp_primitive: body_tokens
                .iter()
                .any(|b| is_warp_primitive(&b.text, dialect)),
            logarithmic,
            constant_trip: constant_trip(t.is("for"), header_tokens, &constants),
            remainder: false,
            start: i,
            header,
            extent: body,
        });
    }
    let blocks = Blocks::of(tokens);
    (0..all.len())
        .map(|k| Loop {
            depth: all.iter().filter(|o| o.encloses(&all[k])).count() as u32,
            remainder: !all.iter().any(|o| all[k].encloses(o))
                && (continues_earlier_loop(&all, k, tokens)
                    || finishes_vector_path(&all, k, vector_sites, &blocks)),
            ..all[k].clone()
        })
        .collect()
}

/// A `for` without an initialiser that steps a counter an earlier loop of
/// the same nest used: the tail of an unrolled or vectorised main loop
/// (`for (; j < n; ++j)`).
fn continues_earlier_loop(all: &[Loop], k: usize, tokens: &[Token]) -> bool {
    let l = &all[k];
    let header = |l: &Loop| &tokens[l.header.0.min(l.header.1)..l.header.1];
    if !tokens[l.start].is("for") || !header(l).first().is_some_and(|t| t.is(";")) {
        return false;
    }
    let outer = |m: &Loop| -> Vec<(usize, usize)> {
        all.iter()
            .filter(|o| o.encloses(m))
            .map(|o| o.extent)
            .collect()
    };
    let names: BTreeSet<&str> = header(l)
        .iter()
        .filter(|t| t.is_ident())
        .map(|t| t.text.as_str())
        .collect();
    all[..k].iter().any(|m| {
        !m.encloses(l)
            && outer(m) == outer(l)
            && header(m).iter().any(|t| names.contains(t.text.as_str()))
    })
}

/// A loop without vector accesses after a block that closed on a vector
/// access, in the same function and nest: the scalar tail of a vectorised
/// path (`if (in range) { vload4(...) } else { for ... }`).
fn finishes_vector_path(all: &[Loop], k: usize, sites: &[usize], blocks: &Blocks) -> bool {
    let l = &all[k];
    let inside = |o: &Loop, p: usize| o.extent.0 <= p && p < o.extent.1;
    if sites.iter().any(|p| inside(l, *p)) {
        return false;
    }
    sites.iter().any(|&p| {
        p < l.start
            && blocks.function(p) == blocks.function(l.start)
            && blocks.innermost(p).is_some_and(|b| b.1 < l.start)
            && all.iter().filter(|o| o.encloses(l)).all(|o| inside(o, p))
    })
}

/// The `{ }` blocks of a source, as token index pairs.
struct Blocks(Vec<(usize, usize, u32)>);

impl Blocks {
    fn of(tokens: &[Token]) -> Blocks {
        let (mut open, mut all) = (Vec::new(), Vec::new());
        for (i, t) in tokens.iter().enumerate() {
            if t.is("{") {
                open.push(i);
            } else if t.is("}")
                && let Some(start) = open.pop()
            {
                all.push((start, i, open.len() as u32));
            }
        }
        Blocks(all)
    }

    fn containing(&self, p: usize) -> impl Iterator<Item = &(usize, usize, u32)> {
        self.0.iter().filter(move |b| b.0 < p && p < b.1)
    }

    /// The innermost block around token `p`.
    fn innermost(&self, p: usize) -> Option<(usize, usize)> {
        self.containing(p).max_by_key(|b| b.2).map(|b| (b.0, b.1))
    }

    /// The top-level block (a function body) around token `p`.
    fn function(&self, p: usize) -> Option<usize> {
        self.containing(p).find(|b| b.2 == 0).map(|b| b.0)
    }
}

/// Names declared `const T NAME = literal;` (or constexpr): compile-time
/// constants a loop bound may use.
fn compile_time_constants(tokens: &[Token]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, t) in tokens.iter().enumerate() {
        if !(t.is("const") || t.is("constexpr")) {
            continue;
        }
        // const [unsigned] T NAME = literal ;
        let rest = &tokens[i + 1..tokens.len().min(i + 6)];
        if let Some(eq) = rest.iter().position(|r| r.is("="))
            && eq >= 2
            && rest
                .get(eq + 1)
                .is_some_and(|v| v.text.chars().next().is_some_and(|c| c.is_ascii_digit()))
            && rest.get(eq + 2).is_some_and(|s| s.is(";") || s.is(","))
        {
            names.insert(rest[eq - 1].text.clone());
        }
    }
    names
}

/// Whether a loop's condition names only its own counters and constants.
fn constant_trip(is_for: bool, header: &[Token], constants: &BTreeSet<String>) -> bool {
    let (init, condition): (&[Token], &[Token]) = if is_for {
        let semis: Vec<usize> = header
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is(";"))
            .map(|(k, _)| k)
            .collect();
        match semis.as_slice() {
            [a, b, ..] => (&header[..*a], &header[a + 1..*b]),
            _ => return false,
        }
    } else {
        (&[], header)
    };
    let counters: BTreeSet<&str> = init
        .windows(2)
        .filter(|w| w[0].is_ident() && w[1].is("="))
        .map(|w| w[0].text.as_str())
        .collect();
    let idents: Vec<&Token> = condition.iter().filter(|t| t.is_ident()).collect();
    let bounded = condition.iter().any(|t| {
        t.text.chars().next().is_some_and(|c| c.is_ascii_digit()) || constants.contains(&t.text)
    });
    bounded
        && idents
            .iter()
            .all(|t| counters.contains(t.text.as_str()) || constants.contains(&t.text))
}

/// The index of the `)` matching the `(` at `open`.
fn matching(tokens: &[Token], open: usize) -> Option<usize> {
    if !tokens.get(open)?.is("(") {
        return None;
    }
    let mut depth = 0;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        if t.is("(") {
            depth += 1;
        } else if t.is(")") {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// The index just past the statement starting at `start`.
fn statement_end(tokens: &[Token], start: usize) -> usize {
    let Some(first) = tokens.get(start) else {
        return tokens.len();
    };
    match first.text.as_str() {
        "{" => {
            let mut depth = 0;
            for (k, t) in tokens.iter().enumerate().skip(start) {
                if t.is("{") {
                    depth += 1;
                } else if t.is("}") {
                    depth -= 1;
                    if depth == 0 {
                        return k + 1;
                    }
                }
            }
            tokens.len()
        }
        "for" | "while" | "switch" => match matching(tokens, start + 1) {
            Some(close) => statement_end(tokens, close + 1),
            None => tokens.len(),
        },
        "if" => match matching(tokens, start + 1) {
            Some(close) => {
                let end = statement_end(tokens, close + 1);
                if tokens.get(end).is_some_and(|t| t.is("else")) {
                    statement_end(tokens, end + 1)
                } else {
                    end
                }
            }
            None => tokens.len(),
        },
        "do" => {
            let end = statement_end(tokens, start + 1);
            match matching(tokens, end + 1) {
                Some(close) => close + 2,
                None => tokens.len(),
            }
        }
        _ => {
            let mut depth = 0i32;
            for (k, t) in tokens.iter().enumerate().skip(start) {
                match t.text.as_str() {
                    "(" | "{" | "[" => depth += 1,
                    ")" | "}" | "]" => depth -= 1,
                    ";" if depth <= 0 => return k + 1,
                    _ => {}
                }
            }
            tokens.len()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_nest_and_know_their_bodies() {
        let src = "
            for (int t = 0; t < n; t += 32) {
                s[tid] = x[t + tid];
                __syncthreads();
                for (int j = 0; j < 32; ++j) acc += s[j];
                __syncthreads();
            }
            do { k >>= 1; } while (k > 0);
            for (int s = 16; s > 0; s >>= 1) v += __shfl_down_sync(~0u, v, s);
        ";
        let f = Features::of(src, Dialect::Cuda);
        let l = &f.loops;
        assert_eq!(l.len(), 4, "{l:?}");
        assert!(l[0].has_barrier && !l[0].constant_trip && l[0].depth == 0);
        assert!(!l[1].has_barrier && l[1].constant_trip && l[1].depth == 1);
        assert!(!l[2].logarithmic && !l[2].constant_trip, "do-while");
        assert!(l[3].logarithmic && l[3].has_warp_primitive && l[3].constant_trip);
        assert_eq!(
            f.data_loop_depth(),
            1,
            "the constant inner loop is unrollable"
        );
        assert_eq!(
            f.algorithmic_loops().count(),
            2,
            "the tile and shuffle loops are left out"
        );
        assert_eq!(
            f.logarithmic_loops(),
            0,
            "a shuffle reduction is coordination"
        );
        assert_eq!(f.tree_reduction(), None);
    }

    #[test]
    fn inline_ptx_counts_by_instruction_not_by_substring() {
        let f = Features::of(
            r#"asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" :: "r"(d), "l"(s));
               asm("@p red.global.add.f32 [%0], %1;" :: "l"(a), "f"(v));"#,
            Dialect::Cuda,
        );
        assert_eq!(
            f.async_copy.as_ref().map(|s| s.pattern.as_str()),
            Some("cp.async.ca.shared.global")
        );
        assert_eq!(
            f.global_coordination.as_ref().map(|s| s.pattern.as_str()),
            Some("red.global.add.f32")
        );
        let only_shared = Features::of(r#"asm("ld.shared.f32 %0, [%1];");"#, Dialect::Cuda);
        assert!(only_shared.global_coordination.is_none() && only_shared.vector_access.is_none());
    }

    #[test]
    fn remainder_loops_finish_a_wider_path_and_nothing_else() {
        let remainders = |src: &str| -> Vec<bool> {
            let f = Features::of(src, Dialect::OpenCl);
            f.loops.iter().map(|l| l.remainder).collect()
        };
        // The tail after an unrolled main loop, and after a vector branch.
        assert_eq!(
            remainders("for (; j + 1 < n; j += 2) {} for (; j < n; ++j) {}"),
            [false, true]
        );
        assert_eq!(
            remainders(
                "void k() { if (c) { v = vload4(i, x); } else { for (k = 4 * i; k < n; ++k) {} } }"
            ),
            [true]
        );
        // A loop after a vector load of the same block is the kernel's own
        // loop, and so is a fresh loop after another.
        assert_eq!(
            remainders("void k() { v = vload4(i, x); for (j = 0; j < n; ++j) {} }"),
            [false]
        );
        assert_eq!(
            remainders("for (j = 0; j < n; ++j) {} for (k = 0; k < n; ++k) {}"),
            [false, false]
        );
        // A helper's vector access does not make the kernel's loop a tail.
        assert_eq!(
            remainders(
                "float4 ld(x) { return vload4(0, x); } void k() { for (j = 0; j < n; ++j) {} }"
            ),
            [false]
        );
    }

    #[test]
    fn vector_types_count_where_memory_is_read_through_them() {
        let f = Features::of(
            "__kernel void k(__global const float4* p, __global float* m) {\n\
             float3 r = p[0].xyz; float4 q = (float4)(r, 0.0f);\n\
             float8 w = *((__global const float8 *)m); }",
            Dialect::OpenCl,
        );
        let names: Vec<&str> = f
            .signature_vectors
            .iter()
            .map(|s| s.pattern.as_str())
            .collect();
        assert_eq!(names, ["float4"], "the signature's buffer type");
        assert_eq!(
            f.vector_access.map(|s| (s.pattern, s.line)),
            Some(("float8".to_string(), 3)),
            "the cast, not the locals or the literal"
        );
    }

    #[test]
    fn constants_make_a_loop_unrollable() {
        let f = Features::of(
            "const int Q = 9;\nfor (int q = 0; q < Q; ++q) {}\nfor (int i = 0; i < n; ++i) {}",
            Dialect::OpenCl,
        );
        assert!(f.loops[0].constant_trip && !f.loops[1].constant_trip);
    }

    #[test]
    fn math_is_normalised_per_builtin() {
        let f = Features::of(
            "a = __expf(x) + native_sqrt(y) + rsqrtf(z) + erf(w) + fmaf(a, b, c) + expo(1);",
            Dialect::Cuda,
        );
        let m: Vec<&str> = f.math.iter().map(String::as_str).collect();
        assert_eq!(m, ["erf", "exp", "rsqrt", "sqrt"]);
    }
}

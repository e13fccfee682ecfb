//! CUDA C++ to device code with NVRTC.

use std::ffi::{CString, c_char};
use std::ptr;

use cudarc::nvrtc::sys::{self as nv, nvrtcResult};
use kevo_backend::{BackendError, CompileDiagnostics, CompileOptions};

/// Name NVRTC gives the source in its diagnostics: `candidate.cu(5): error: ...`.
pub(crate) const PROGRAM_NAME: &str = "candidate.cu";

/// What NVRTC is asked to produce for a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A CUBIN for the device's own architecture (`sm_90a`): ptxas runs at
    /// compile time, so its errors (too much shared memory, bad inline PTX)
    /// are compile errors, and loading costs no JIT.
    Cubin(String),
    /// PTX for the newest virtual architecture NVRTC knows that the device
    /// can run (`compute_90`), JIT-compiled by the driver at load time. Used
    /// only when the device is newer than NVRTC.
    Ptx(String),
}

impl Target {
    /// The `--gpu-architecture` value (NVRTC has no `--gpu-arch` spelling).
    pub fn arch(&self) -> &str {
        match self {
            Target::Cubin(a) | Target::Ptx(a) => a,
        }
    }
}

/// Compute capabilities whose architecture-specific variant (`sm_90a`)
/// exists: it unlocks wgmma, setmaxnreg and TMA multicast on Hopper and
/// tcgen05 on Blackwell, which portable `sm_90` code cannot use. The `a`
/// code runs only on that exact capability, which is the device in hand.
const ARCH_SPECIFIC: &[i32] = &[90, 100, 103, 110, 120, 121];

/// Pick the NVRTC target for a device of compute capability `major.minor`.
pub(crate) fn target_for(major: i32, minor: i32, supported: &[i32]) -> Result<Target, String> {
    let cc = major * 10 + minor;
    if supported.contains(&cc) {
        let suffix = if ARCH_SPECIFIC.contains(&cc) { "a" } else { "" };
        return Ok(Target::Cubin(format!("sm_{cc}{suffix}")));
    }
    match supported.iter().copied().filter(|&a| a <= cc).max() {
        Some(a) => Ok(Target::Ptx(format!("compute_{a}"))),
        None => Err(format!(
            "NVRTC cannot generate code for compute capability {major}.{minor} (it supports {:?})",
            supported
        )),
    }
}

/// The NVRTC command line for `options`.
pub(crate) fn flags(
    target: &Target,
    options: &CompileOptions,
    include_dir: Option<&str>,
) -> Vec<String> {
    let mut f = vec![
        format!("--gpu-architecture={}", target.arch()),
        "-std=c++17".to_string(),
        // Line tables cost nothing at run time and let profilers map SASS
        // back to the candidate's source lines.
        "-lineinfo".to_string(),
    ];
    if options.fast_math {
        f.push("--use_fast_math".into());
    }
    if let Some(n) = options.max_registers {
        f.push(format!("--maxrregcount={n}"));
    }
    if let Some(dir) = include_dir {
        f.push(format!("--include-path={dir}"));
    }
    f.extend(options.extra_flags.iter().cloned());
    f
}

/// A compiled image ready for `cuModuleLoadDataEx`.
pub(crate) enum Image {
    /// ELF bytes.
    Cubin(Vec<u8>),
    /// NUL-terminated PTX text.
    Ptx(Vec<u8>),
}

/// The program handle, destroyed on every path out of [`compile`].
struct Program(nv::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here.
        unsafe {
            nv::nvrtcDestroyProgram(&mut self.0);
        }
    }
}

fn nvrtc_error(r: nvrtcResult, what: &str) -> BackendError {
    BackendError::Runtime(format!("NVRTC {what}: {r:?}"))
}

fn check(r: nvrtcResult, what: &str) -> Result<(), BackendError> {
    if r == nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(nvrtc_error(r, what))
    }
}

fn program_log(prog: &Program) -> String {
    let mut size = 0usize;
    // SAFETY: valid program, out-parameter.
    if unsafe { nv::nvrtcGetProgramLogSize(prog.0, &mut size) } != nvrtcResult::NVRTC_SUCCESS
        || size == 0
    {
        return String::new();
    }
    let mut buf = vec![0u8; size];
    // SAFETY: the buffer has the size NVRTC asked for.
    if unsafe { nv::nvrtcGetProgramLog(prog.0, buf.as_mut_ptr().cast::<c_char>()) }
        != nvrtcResult::NVRTC_SUCCESS
    {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Compile `source`. On success returns the image and NVRTC's log (warnings,
/// often empty); a rejected source is `BackendError::Compile` with the log.
pub(crate) fn compile(
    source: &str,
    flags: &[String],
    target: &Target,
) -> Result<(Image, String), BackendError> {
    let src = CString::new(source).map_err(|_| {
        BackendError::Compile(CompileDiagnostics::from_log(
            "the source contains a NUL byte",
        ))
    })?;
    let name = CString::new(PROGRAM_NAME)
        .map_err(|_| nvrtc_error(nvrtcResult::NVRTC_ERROR_INVALID_INPUT, "program name"))?;
    let c_flags: Vec<CString> = flags
        .iter()
        .map(|f| CString::new(f.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            BackendError::Compile(CompileDiagnostics::from_log(
                "a compiler flag contains a NUL byte",
            ))
        })?;
    let flag_ptrs: Vec<*const c_char> = c_flags.iter().map(|f| f.as_ptr()).collect();

    let mut raw = ptr::null_mut();
    // SAFETY: NUL-terminated strings that outlive the call; no headers.
    check(
        unsafe {
            nv::nvrtcCreateProgram(
                &mut raw,
                src.as_ptr(),
                name.as_ptr(),
                0,
                ptr::null(),
                ptr::null(),
            )
        },
        "creating a program",
    )?;
    let prog = Program(raw);
    // SAFETY: the option pointers refer to live CStrings.
    let r = unsafe { nv::nvrtcCompileProgram(prog.0, flag_ptrs.len() as i32, flag_ptrs.as_ptr()) };
    let log = program_log(&prog);
    match r {
        nvrtcResult::NVRTC_SUCCESS => {}
        // An unknown or malformed flag from `extra_flags` is the candidate
        // configuration's fault, reported like a compile error.
        nvrtcResult::NVRTC_ERROR_COMPILATION | nvrtcResult::NVRTC_ERROR_INVALID_OPTION => {
            let log = if log.trim().is_empty() {
                format!(
                    "NVRTC failed with {r:?} and no log (flags: {})",
                    flags.join(" ")
                )
            } else {
                log
            };
            return Err(BackendError::Compile(CompileDiagnostics::from_log(log)));
        }
        _ => return Err(nvrtc_error(r, "compiling")),
    }
    let image = compiled_image(&prog, target)?;
    Ok((image, log))
}

/// The image of a compiled program in the form `target` asks for (a
/// CUBIN, or NUL-terminated PTX for the driver to JIT).
fn compiled_image(prog: &Program, target: &Target) -> Result<Image, BackendError> {
    let image = match target {
        Target::Cubin(_) => {
            let mut size = 0usize;
            // SAFETY: compiled program, out-parameter.
            check(
                unsafe { nv::nvrtcGetCUBINSize(prog.0, &mut size) },
                "CUBIN size",
            )?;
            let mut buf = vec![0u8; size];
            // SAFETY: the buffer has the size NVRTC reported.
            check(
                unsafe { nv::nvrtcGetCUBIN(prog.0, buf.as_mut_ptr().cast::<c_char>()) },
                "CUBIN",
            )?;
            Image::Cubin(buf)
        }
        Target::Ptx(_) => {
            let mut size = 0usize;
            // SAFETY: compiled program, out-parameter.
            check(
                unsafe { nv::nvrtcGetPTXSize(prog.0, &mut size) },
                "PTX size",
            )?;
            let mut buf = vec![0u8; size];
            // SAFETY: the buffer has the size NVRTC reported (NUL included).
            check(
                unsafe { nv::nvrtcGetPTX(prog.0, buf.as_mut_ptr().cast::<c_char>()) },
                "PTX",
            )?;
            if buf.last() != Some(&0) {
                buf.push(0);
            }
            Image::Ptx(buf)
        }
    };
    Ok(image)
}

/// A writable module-scope variable of a CUBIN and the bytes it starts
/// with, so it can be put back before every run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModuleGlobal {
    pub name: String,
    pub initial: Vec<u8>,
}

/// What a module holds besides code that a kernel could write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ModuleState {
    /// Variables the backend restores before every run (CUBIN images).
    pub resettable: Vec<ModuleGlobal>,
    /// Bytes (or, in PTX, declarations) of state it cannot restore.
    pub unresettable: u64,
}

impl Image {
    /// The writable module-scope variables (`__device__`, `__managed__`,
    /// function-scope `static __device__`, and the string literals `printf`
    /// formats live in): in a CUBIN, the data objects of the allocated,
    /// writable `.nv.global*` sections, each with its initial bytes; in PTX,
    /// module-scope `.global` declarations, which the backend cannot
    /// restore. `None` when the image cannot be read.
    pub(crate) fn module_state(&self) -> Option<ModuleState> {
        match self {
            Image::Cubin(elf) => elf_module_globals(elf).map(|resettable| ModuleState {
                resettable,
                unresettable: 0,
            }),
            Image::Ptx(text) => {
                let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
                Some(ModuleState {
                    resettable: Vec::new(),
                    unresettable: ptx_global_declarations(&String::from_utf8_lossy(&text[..end])),
                })
            }
        }
    }
}

const SHF_WRITE: u64 = 0x1;
const SHF_ALLOC: u64 = 0x2;

const SHT_NOBITS: u32 = 8;

/// The data objects (`STT_OBJECT` symbols) that live in allocated, writable
/// sections named `.nv.global` or `.nv.global.*`, with their initial bytes
/// (zeros in a `NOBITS` section). NVRTC can emit a one-byte `.nv.global`
/// section with no object in it (seen on sm_90a for lj's seed): only named
/// objects count.
fn elf_module_globals(elf: &[u8]) -> Option<Vec<ModuleGlobal>> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    let usize_at = |o: usize| usize::try_from(u64_at(o)?).ok();
    // 64-bit little-endian ELF only (what NVRTC produces).
    if elf.get(0..4)? != b"\x7fELF" || *elf.get(4)? != 2 || *elf.get(5)? != 1 {
        return None;
    }
    let shoff = usize_at(0x28)?;
    let shentsize = usize::from(u16_at(0x3A)?);
    let shnum = usize::from(u16_at(0x3C)?);
    let shstrndx = usize::from(u16_at(0x3E)?);
    if shentsize < 64 || shstrndx >= shnum {
        return None;
    }
    let header = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let c_str = |at: usize| -> Option<&[u8]> {
        let bytes = elf.get(at..)?;
        Some(&bytes[..bytes.iter().position(|&b| b == 0)?])
    };
    let names_at = usize_at(header(shstrndx)? + 24)?;
    // (index, kind, file offset) of the writable global sections.
    let mut globals = Vec::new();
    let mut symtabs = Vec::new();
    for i in 0..shnum {
        let h = header(i)?;
        let name = c_str(names_at.checked_add(usize::try_from(u32_at(h)?).ok()?)?)?;
        let kind = u32_at(h + 4)?;
        let flags = u64_at(h + 8)?;
        let is_global = name == b".nv.global" || name.starts_with(b".nv.global.");
        if is_global && flags & (SHF_WRITE | SHF_ALLOC) == SHF_WRITE | SHF_ALLOC {
            globals.push((i, kind, usize_at(h + 24)?));
        }
        if kind == SHT_SYMTAB {
            symtabs.push(i);
        }
    }
    let mut out = Vec::new();
    for t in symtabs {
        let h = header(t)?;
        let (at, size) = (usize_at(h + 24)?, usize_at(h + 32)?);
        let strtab = usize_at(header(usize::try_from(u32_at(h + 40)?).ok()?)? + 24)?;
        let entsize = usize_at(h + 56)?.max(24);
        for k in 0..size / entsize {
            let sym = at.checked_add(k * entsize)?;
            let info = *elf.get(sym + 4)?;
            let shndx = usize::from(u16_at(sym + 6)?);
            let Some(&(_, kind, data_at)) = globals.iter().find(|g| g.0 == shndx) else {
                continue;
            };
            if info & 0xF != STT_OBJECT {
                continue;
            }
            let value = usize_at(sym + 8)?;
            let bytes = usize_at(sym + 16)?;
            let name = String::from_utf8(
                c_str(strtab.checked_add(usize::try_from(u32_at(sym)?).ok()?)?)?.to_vec(),
            )
            .ok()?;
            let initial = if kind == SHT_NOBITS {
                vec![0u8; bytes]
            } else {
                let from = data_at.checked_add(value)?;
                elf.get(from..from.checked_add(bytes)?)?.to_vec()
            };
            out.push(ModuleGlobal { name, initial });
        }
    }
    Some(out)
}

const SHT_SYMTAB: u32 = 2;
const STT_OBJECT: u8 = 1;

/// Number of module-scope `.global` variable declarations in PTX (their
/// sizes would need the type grammar; any count above zero is refused).
fn ptx_global_declarations(ptx: &str) -> u64 {
    ptx.lines()
        .filter(|line| {
            let mut words = line.split_whitespace();
            loop {
                match words.next() {
                    Some(".visible" | ".weak" | ".extern" | ".common") => continue,
                    Some(".global") => return true,
                    _ => return false,
                }
            }
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One section of a test ELF: name, type, flags, contents (or the
    /// size of a NOBITS section).
    struct Section(&'static str, u32, u64, Vec<u8>);
    /// One symbol: name, index into the sections, type, value, size.
    struct Symbol(&'static str, usize, u8, u64, u64);

    /// A minimal ELF64: a null section, the section-name table, `sections`,
    /// and with `symbols` a string table and a symbol table.
    fn elf_with(sections: &[Section], symbols: Option<&[Symbol]>) -> Vec<u8> {
        let mut blob = vec![0u8; 64];
        let mut names = vec![0u8];
        let name_of = |n: &str, names: &mut Vec<u8>| {
            let at = names.len() as u32;
            names.extend_from_slice(n.as_bytes());
            names.push(0);
            at
        };
        // (name offset, type, flags, offset, size, link)
        let mut headers: Vec<(u32, u32, u64, u64, u64, u32)> = vec![(0, 0, 0, 0, 0, 0)];
        let shstr_name = name_of(".shstrtab", &mut names);
        headers.push((shstr_name, 3, 0, 0, 0, 0));
        for Section(name, kind, flags, data) in sections {
            let n = name_of(name, &mut names);
            let at = blob.len() as u64;
            if *kind != SHT_NOBITS {
                blob.extend_from_slice(data);
            }
            headers.push((n, *kind, *flags, at, data.len() as u64, 0));
        }
        if let Some(symbols) = symbols {
            let mut strtab = vec![0u8];
            let mut entries = Vec::new();
            for Symbol(name, section, kind, value, size) in symbols {
                let at = strtab.len() as u32;
                strtab.extend_from_slice(name.as_bytes());
                strtab.push(0);
                let mut e = vec![0u8; 24];
                e[0..4].copy_from_slice(&at.to_le_bytes());
                e[4] = *kind;
                e[6..8].copy_from_slice(&((section + 2) as u16).to_le_bytes());
                e[8..16].copy_from_slice(&value.to_le_bytes());
                e[16..24].copy_from_slice(&size.to_le_bytes());
                entries.extend(e);
            }
            let str_name = name_of(".strtab", &mut names);
            let str_at = blob.len() as u64;
            blob.extend_from_slice(&strtab);
            headers.push((str_name, 3, 0, str_at, strtab.len() as u64, 0));
            let sym_name = name_of(".symtab", &mut names);
            let sym_at = blob.len() as u64;
            blob.extend_from_slice(&entries);
            let link = (headers.len() - 1) as u32;
            headers.push((sym_name, SHT_SYMTAB, 0, sym_at, entries.len() as u64, link));
        }
        let names_at = blob.len() as u64;
        blob.extend_from_slice(&names);
        headers[1].3 = names_at;
        headers[1].4 = names.len() as u64;
        let shoff = blob.len();
        blob[0..4].copy_from_slice(b"\x7fELF");
        blob[4] = 2;
        blob[5] = 1;
        blob[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        blob[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        blob[0x3C..0x3E].copy_from_slice(&(headers.len() as u16).to_le_bytes());
        blob[0x3E..0x40].copy_from_slice(&1u16.to_le_bytes());
        for (name, kind, flags, offset, size, link) in headers {
            let mut h = vec![0u8; 64];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[8..16].copy_from_slice(&flags.to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h[56..64].copy_from_slice(&24u64.to_le_bytes());
            blob.extend(h);
        }
        blob
    }

    #[test]
    fn writable_globals_are_found_in_a_cubin_with_their_initial_bytes() {
        let rw = SHF_WRITE | SHF_ALLOC;
        let sections = [
            Section(".text.saxpy", 1, SHF_ALLOC | 0x4, vec![0; 32]),
            Section(".nv.constant0.saxpy", 1, SHF_ALLOC, vec![0; 16]),
            Section(".nv.global", SHT_NOBITS, rw, vec![0; 8]),
            Section(".nv.global.init", 1, rw, b"xx%d\n\0ab".to_vec()),
        ];
        let symbols = [
            Symbol("memo_n", 2, STT_OBJECT, 0, 8),
            Symbol("$str", 3, STT_OBJECT, 2, 4),
            Symbol("saxpy", 0, 2, 0, 32),
        ];
        let globals = elf_module_globals(&elf_with(&sections, Some(&symbols))).unwrap();
        assert_eq!(
            globals,
            [
                ModuleGlobal {
                    name: "memo_n".into(),
                    initial: vec![0; 8]
                },
                ModuleGlobal {
                    name: "$str".into(),
                    initial: b"%d\n\0".to_vec()
                },
            ]
        );
        // A one-byte `.nv.global` with no object in it is no state.
        let empty = [
            Section(".text.lj_step", 1, SHF_ALLOC | 0x4, vec![0; 32]),
            Section(".nv.global", SHT_NOBITS, rw, vec![0; 1]),
        ];
        let globals =
            elf_module_globals(&elf_with(&empty, Some(&[Symbol("lj_step", 0, 2, 0, 32)])));
        assert_eq!(globals, Some(vec![]));
        let shared = [Section(".nv.shared.saxpy", SHT_NOBITS, rw, vec![0; 4096])];
        assert_eq!(
            elf_module_globals(&elf_with(
                &shared,
                Some(&[Symbol("tile", 0, STT_OBJECT, 0, 4096)])
            )),
            Some(vec![])
        );
        assert_eq!(elf_module_globals(b"not an elf"), None);
        let elf = elf_with(&sections, Some(&symbols));
        assert_eq!(elf_module_globals(&elf[..70]), None, "truncated");
    }

    #[test]
    fn module_scope_globals_are_found_in_ptx() {
        let ptx = ".version 8.0\n.target sm_90\n.visible .global .align 4 .u32 calls;\n.global .align 4 .b8 memo[4096];\n.visible .entry saxpy(\n\tld.global.f32 %f1, [%rd1];\n\tst.global.f32 [%rd2], %f2;\n";
        assert_eq!(ptx_global_declarations(ptx), 2);
        assert_eq!(
            ptx_global_declarations(".visible .const .align 4 .f32 a;\n\tld.global.u32 %r1, [x];"),
            0
        );
    }

    #[test]
    fn hopper_gets_the_arch_specific_cubin() {
        let supported = [75, 80, 86, 89, 90, 100, 120];
        assert_eq!(
            target_for(9, 0, &supported),
            Ok(Target::Cubin("sm_90a".into()))
        );
        assert_eq!(
            target_for(8, 6, &supported),
            Ok(Target::Cubin("sm_86".into()))
        );
        assert_eq!(
            target_for(12, 0, &supported),
            Ok(Target::Cubin("sm_120a".into()))
        );
    }

    #[test]
    fn a_device_newer_than_nvrtc_gets_ptx() {
        let supported = [75, 80, 86, 89, 90];
        assert_eq!(
            target_for(10, 0, &supported),
            Ok(Target::Ptx("compute_90".into()))
        );
        assert!(target_for(7, 0, &supported).is_err());
    }

    #[test]
    fn options_become_nvrtc_flags() {
        let opts = CompileOptions {
            fast_math: true,
            max_registers: Some(64),
            extra_flags: vec!["-DTILE=32".into()],
        };
        let f = flags(
            &Target::Cubin("sm_90a".into()),
            &opts,
            Some("/usr/local/cuda/include"),
        );
        assert_eq!(
            f,
            [
                "--gpu-architecture=sm_90a",
                "-std=c++17",
                "-lineinfo",
                "--use_fast_math",
                "--maxrregcount=64",
                "--include-path=/usr/local/cuda/include",
                "-DTILE=32"
            ]
        );
        let plain = CompileOptions {
            fast_math: false,
            ..CompileOptions::default()
        };
        let f = flags(&Target::Ptx("compute_90".into()), &plain, None);
        assert_eq!(
            f,
            ["--gpu-architecture=compute_90", "-std=c++17", "-lineinfo"]
        );
    }
}

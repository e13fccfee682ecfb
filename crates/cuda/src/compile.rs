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
    Ok((image, log))
}

impl Image {
    /// Bytes of writable module-scope variables (`__device__`,
    /// `__managed__`, function-scope `static __device__`): in a CUBIN the
    /// sizes of the allocated, writable `.nv.global*` sections; in PTX the
    /// module-scope `.global` declarations. `None` when the image cannot be
    /// read (the evaluator then cannot vouch for it).
    pub(crate) fn writable_global_bytes(&self) -> Option<u64> {
        match self {
            Image::Cubin(elf) => elf_writable_global_bytes(elf),
            Image::Ptx(text) => {
                let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
                Some(ptx_global_declarations(&String::from_utf8_lossy(
                    &text[..end],
                )))
            }
        }
    }
}

const SHF_WRITE: u64 = 0x1;
const SHF_ALLOC: u64 = 0x2;

/// Bytes of writable module-scope variables in a CUBIN: the sizes of the
/// data objects (`STT_OBJECT` symbols) that live in allocated, writable
/// sections named `.nv.global` or `.nv.global.*`. Only named objects count:
/// NVRTC can emit a one-byte `.nv.global` section for a module that
/// declares no variable at all (seen on sm_90a for lj's seed). Without a
/// symbol table the sections' sizes count instead.
fn elf_writable_global_bytes(elf: &[u8]) -> Option<u64> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    // 64-bit little-endian ELF only (what NVRTC produces).
    if elf.get(0..4)? != b"\x7fELF" || *elf.get(4)? != 2 || *elf.get(5)? != 1 {
        return None;
    }
    let shoff = usize::try_from(u64_at(0x28)?).ok()?;
    let shentsize = usize::from(u16_at(0x3A)?);
    let shnum = usize::from(u16_at(0x3C)?);
    let shstrndx = usize::from(u16_at(0x3E)?);
    if shentsize < 64 || shstrndx >= shnum {
        return None;
    }
    let header = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let offset_of = |i: usize| usize::try_from(u64_at(header(i)? + 24)?).ok();
    let c_str = |at: usize| -> Option<&[u8]> {
        let bytes = elf.get(at..)?;
        Some(&bytes[..bytes.iter().position(|&b| b == 0)?])
    };
    let names_at = offset_of(shstrndx)?;
    let mut globals = Vec::new();
    let mut section_bytes = 0u64;
    let mut symtabs = Vec::new();
    for i in 0..shnum {
        let h = header(i)?;
        let name = c_str(names_at.checked_add(usize::try_from(u32_at(h)?).ok()?)?)?;
        let kind = u32_at(h + 4)?;
        let flags = u64_at(h + 8)?;
        let is_global = name == b".nv.global" || name.starts_with(b".nv.global.");
        if is_global && flags & (SHF_WRITE | SHF_ALLOC) == SHF_WRITE | SHF_ALLOC {
            globals.push(i);
            section_bytes += u64_at(h + 32)?;
        }
        if kind == SHT_SYMTAB {
            symtabs.push(i);
        }
    }
    if symtabs.is_empty() {
        return Some(section_bytes);
    }
    let mut total = 0u64;
    for t in symtabs {
        let h = header(t)?;
        let (at, size) = (offset_of(t)?, usize::try_from(u64_at(h + 32)?).ok()?);
        let entsize = usize::try_from(u64_at(h + 56)?).ok()?.max(24);
        for k in 0..size / entsize {
            let sym = at.checked_add(k * entsize)?;
            let info = *elf.get(sym + 4)?;
            let shndx = usize::from(u16_at(sym + 6)?);
            let bytes = u64_at(sym + 16)?;
            if info & 0xF == STT_OBJECT && globals.contains(&shndx) {
                total += bytes;
            }
        }
    }
    Some(total)
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

    /// A minimal ELF64 with the given (name, flags, size) sections after
    /// the null section and the section-name table, and, when `symbols`
    /// is given, a symbol table of (section index among `sections`, type,
    /// size) entries.
    fn elf_with(sections: &[(&str, u64, u64)], symbols: Option<&[(usize, u8, u64)]>) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut name_offsets = Vec::new();
        let symtab_name = [".symtab"];
        let all: Vec<&str> = std::iter::once(".shstrtab")
            .chain(sections.iter().map(|s| s.0))
            .chain(symbols.map(|_| symtab_name[0]))
            .collect();
        for n in &all {
            name_offsets.push(names.len() as u32);
            names.extend_from_slice(n.as_bytes());
            names.push(0);
        }
        let names_at = 64usize;
        let syms = symbols.unwrap_or(&[]);
        let symtab_at = names_at + names.len();
        let shoff = symtab_at + 24 * syms.len();
        let shnum = 2 + sections.len() + usize::from(symbols.is_some());
        let mut elf = vec![0u8; shoff + 64 * shnum];
        elf[0..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&(shnum as u16).to_le_bytes());
        elf[0x3E..0x40].copy_from_slice(&1u16.to_le_bytes());
        elf[names_at..names_at + names.len()].copy_from_slice(&names);
        for (k, &(section, kind, size)) in syms.iter().enumerate() {
            let at = symtab_at + 24 * k;
            elf[at + 4] = kind;
            elf[at + 6..at + 8].copy_from_slice(&((section + 2) as u16).to_le_bytes());
            elf[at + 16..at + 24].copy_from_slice(&size.to_le_bytes());
        }
        let mut put = |i: usize, name: u32, kind: u32, flags: u64, offset: u64, size: u64| {
            let h = shoff + 64 * i;
            elf[h..h + 4].copy_from_slice(&name.to_le_bytes());
            elf[h + 4..h + 8].copy_from_slice(&kind.to_le_bytes());
            elf[h + 8..h + 16].copy_from_slice(&flags.to_le_bytes());
            elf[h + 24..h + 32].copy_from_slice(&offset.to_le_bytes());
            elf[h + 32..h + 40].copy_from_slice(&size.to_le_bytes());
            elf[h + 56..h + 64].copy_from_slice(&24u64.to_le_bytes());
        };
        put(
            1,
            name_offsets[0],
            3,
            0,
            names_at as u64,
            names.len() as u64,
        );
        for (k, (_, flags, size)) in sections.iter().enumerate() {
            put(2 + k, name_offsets[k + 1], 1, *flags, 0, *size);
        }
        if symbols.is_some() {
            let i = 2 + sections.len();
            put(
                i,
                name_offsets[i - 1],
                SHT_SYMTAB,
                0,
                symtab_at as u64,
                (24 * syms.len()) as u64,
            );
        }
        elf
    }

    #[test]
    fn writable_globals_are_found_in_a_cubin() {
        let rw = SHF_WRITE | SHF_ALLOC;
        let sections = [
            (".text.saxpy", SHF_ALLOC | 0x4, 256),
            (".nv.constant0.saxpy", SHF_ALLOC, 64),
            (".nv.global", rw, 8),
            (".nv.global.init", rw, 4),
        ];
        // Without a symbol table: the sections' sizes.
        assert_eq!(
            elf_writable_global_bytes(&elf_with(&sections, None)),
            Some(12)
        );
        // With one: the objects in them (a function symbol does not count).
        let symbols = [(2, STT_OBJECT, 8), (3, STT_OBJECT, 4), (0, 2, 256)];
        assert_eq!(
            elf_writable_global_bytes(&elf_with(&sections, Some(&symbols))),
            Some(12)
        );
        // A one-byte `.nv.global` with no object in it is no state.
        let empty = [
            (".text.lj_step", SHF_ALLOC | 0x4, 256),
            (".nv.global", rw, 1),
        ];
        assert_eq!(
            elf_writable_global_bytes(&elf_with(&empty, Some(&[(0, 2, 256)]))),
            Some(0)
        );
        let clean = [
            (".text.saxpy", SHF_ALLOC | 0x4, 256),
            (".nv.shared.saxpy", rw, 4096),
        ];
        assert_eq!(elf_writable_global_bytes(&elf_with(&clean, None)), Some(0));
        assert_eq!(elf_writable_global_bytes(b"not an elf"), None);
        let elf = elf_with(&sections, None);
        assert_eq!(elf_writable_global_bytes(&elf[..70]), None, "truncated");
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

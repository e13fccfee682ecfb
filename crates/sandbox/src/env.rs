//! The environment a worker starts with: an allow-list of what GPU drivers,
//! OpenCL loaders and compilers read, never credentials.

use std::ffi::{OsStr, OsString};

/// Variables passed through by exact name.
const EXACT: &[&str] = &[
    "PATH",
    "LD_LIBRARY_PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "RUST_BACKTRACE",
    "RUST_LOG",
];

/// Variables passed through by prefix: CUDA and NVIDIA driver settings
/// (CUDA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES), the OpenCL ICD loader
/// (OCL_ICD_VENDORS, OCL_ICD_FILENAMES, OPENCL_VENDOR_PATH), PoCL
/// (POCL_DEVICES, POCL_MAX_PTHREAD_COUNT), compute-sanitizer's injection
/// (its own variables), and kevo's own.
const PREFIXES: &[&str] = &[
    "CUDA_", "NVIDIA_", "NV_", "OCL_ICD_", "OPENCL_", "POCL_", "KEVO_",
];

/// Words that mark a credential: such a variable is dropped even when its
/// prefix is allowed (KEVO_API_KEY, CUDA_TOKEN).
const SECRET_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
];

/// Whether a name marks a credential (dropped even when set on purpose).
pub fn is_secret(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// Whether a variable of this name reaches a worker.
pub fn is_allowed(name: &OsStr) -> bool {
    if is_secret(name) {
        return false;
    }
    let Some(name) = name.to_str() else {
        return false;
    };
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The allowed subset of `vars`, in order.
pub fn allowed_environment(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    vars.into_iter().filter(|(k, _)| is_allowed(k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(names: &[&str]) -> Vec<(OsString, OsString)> {
        names
            .iter()
            .map(|n| (OsString::from(n), OsString::from("v")))
            .collect()
    }

    #[test]
    fn drivers_get_their_variables_and_credentials_never_pass() {
        let kept: Vec<String> = allowed_environment(pairs(&[
            "PATH",
            "CUDA_VISIBLE_DEVICES",
            "OCL_ICD_VENDORS",
            "POCL_DEVICES",
            "KEVO_CACHE_DIR",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "KEVO_API_KEY",
            "CUDA_AUTH_TOKEN",
            "HOME",
            "SSH_AUTH_SOCK",
            "DATABASE_URL",
            "HTTPS_PROXY",
            "PGPASSWORD",
        ]))
        .into_iter()
        .map(|(k, _)| k.into_string().unwrap())
        .collect();
        assert_eq!(
            kept,
            [
                "PATH",
                "CUDA_VISIBLE_DEVICES",
                "OCL_ICD_VENDORS",
                "POCL_DEVICES",
                "KEVO_CACHE_DIR"
            ]
        );
    }

    #[test]
    fn a_name_that_is_not_unicode_is_dropped() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![b'C', b'U', b'D', b'A', b'_', 0xff]);
        assert!(!is_allowed(&odd));
    }
}

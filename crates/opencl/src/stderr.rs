//! What a driver prints to the process's stderr while it builds a program,
//! kept apart: a command prints only its own output.

use std::io::{Read, Seek, SeekFrom};
use std::os::fd::FromRawFd;

/// Runs `f` with file descriptor 2 pointed at an anonymous file and returns
/// what was written there (up to 64 KiB). Where the file cannot be made
/// (no memfd), `f` runs with stderr as it was.
pub(crate) fn captured<T>(f: impl FnOnce() -> T) -> (T, String) {
    // SAFETY: plain descriptor calls on descriptors this function owns; fd
    // 2 is restored before returning whatever `f` did.
    unsafe {
        let fd = libc::memfd_create(c"kevo-build-stderr".as_ptr(), libc::MFD_CLOEXEC);
        if fd < 0 {
            return (f(), String::new());
        }
        let mut file = std::fs::File::from_raw_fd(fd);
        let saved = libc::dup(2);
        if saved < 0 || libc::dup2(fd, 2) < 0 {
            if saved >= 0 {
                libc::close(saved);
            }
            return (f(), String::new());
        }
        let out = f();
        libc::dup2(saved, 2);
        libc::close(saved);
        let mut text = String::new();
        if file.seek(SeekFrom::Start(0)).is_ok() {
            let _ = (&mut file).take(64 << 10).read_to_string(&mut text);
        }
        (out, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_to_fd_2_is_returned_not_printed() {
        let (value, text) = captured(|| {
            // SAFETY: a write of a static buffer to fd 2.
            unsafe { libc::write(2, b"45 errors generated.\n".as_ptr().cast(), 21) };
            7
        });
        assert_eq!(value, 7);
        assert_eq!(text, "45 errors generated.\n");
        // fd 2 is the test's stderr again: writing to it still works.
        let (_, after) = captured(|| ());
        assert_eq!(after, "");
    }
}

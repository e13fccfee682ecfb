//! The range checks every backend makes before it touches device memory,
//! written once: a bad copy reads the same on OpenCL and CUDA, and an
//! offset near `usize::MAX` is refused instead of wrapping (OpenCL's view
//! check once added `offset + bytes` unchecked).

use crate::{BackendError, BufferId, VIEW_ALIGN};

/// A host transfer or fill of part of one buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Host to device, at the start of the buffer.
    Upload,
    /// Device to host, at `offset`.
    Download { offset: usize },
    /// A byte pattern set on the device, from the start.
    Fill,
}

/// Whether `len` bytes of `access` fit a buffer of `buffer_bytes` bytes:
/// `Ok(true)` when there is something to do, `Ok(false)` for zero bytes
/// (no call should reach the driver), an error naming the sizes otherwise.
pub fn check_access(access: Access, len: usize, buffer_bytes: usize) -> Result<bool, BackendError> {
    let offset = match access {
        Access::Download { offset } => offset,
        Access::Upload | Access::Fill => 0,
    };
    if offset.checked_add(len).is_none_or(|end| end > buffer_bytes) {
        let what = match access {
            Access::Upload => format!("upload of {len} bytes into"),
            Access::Download { offset: 0 } => format!("download of {len} bytes from"),
            Access::Download { offset } => format!("download of {len} bytes at {offset} from"),
            Access::Fill => format!("fill of {len} bytes of"),
        };
        return Err(BackendError::Runtime(format!(
            "{what} a {buffer_bytes}-byte buffer"
        )));
    }
    Ok(len > 0)
}

/// Whether a view of `bytes` bytes at `offset` fits a parent of
/// `parent_bytes` bytes: not empty, inside it, at a multiple of
/// [`VIEW_ALIGN`].
pub fn check_view(offset: usize, bytes: usize, parent_bytes: usize) -> Result<(), BackendError> {
    if bytes == 0
        || offset
            .checked_add(bytes)
            .is_none_or(|end| end > parent_bytes)
        || !offset.is_multiple_of(VIEW_ALIGN)
    {
        return Err(BackendError::Runtime(format!(
            "view of {bytes} bytes at {offset} in a {parent_bytes}-byte buffer (offsets must \
             be multiples of {VIEW_ALIGN})"
        )));
    }
    Ok(())
}

/// A device-to-device copy needs two buffers: onto itself it would be an
/// overlapping copy, which neither runtime defines.
pub fn check_distinct(src: BufferId, dst: BufferId) -> Result<(), BackendError> {
    if src == dst {
        return Err(BackendError::Runtime("copy of a buffer onto itself".into()));
    }
    Ok(())
}

/// Whether `bytes` bytes can be copied between buffers of `src_bytes` and
/// `dst_bytes`: `Ok(false)` for zero bytes.
pub fn check_copy(bytes: usize, src_bytes: usize, dst_bytes: usize) -> Result<bool, BackendError> {
    if bytes > src_bytes.min(dst_bytes) {
        return Err(BackendError::Runtime(format!(
            "copy of {bytes} bytes between buffers of {src_bytes} and {dst_bytes} bytes"
        )));
    }
    Ok(bytes > 0)
}

/// A buffer of zero bytes is refused before any driver call.
pub fn check_alloc(bytes: usize) -> Result<(), BackendError> {
    if bytes == 0 {
        return Err(BackendError::Runtime(
            "cannot allocate a zero-byte buffer".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_inside_pass_and_outside_name_the_sizes() {
        assert!(check_access(Access::Upload, 8, 8).unwrap());
        assert!(!check_access(Access::Fill, 0, 8).unwrap());
        let e = check_access(Access::Upload, 9, 8).unwrap_err().to_string();
        assert!(e.contains("upload of 9 bytes into a 8-byte buffer"), "{e}");
        let e = check_access(Access::Download { offset: 4 }, 5, 8).unwrap_err();
        assert!(
            e.to_string().contains("download of 5 bytes at 4 from"),
            "{e}"
        );
        let e = check_access(Access::Download { offset: 0 }, 9, 8).unwrap_err();
        assert!(e.to_string().contains("download of 9 bytes from"), "{e}");
        let e = check_access(Access::Fill, 9, 8).unwrap_err();
        assert!(e.to_string().contains("fill of 9 bytes of"), "{e}");
    }

    #[test]
    fn an_offset_near_the_end_of_the_address_space_is_refused_not_wrapped() {
        let near_max = usize::MAX - 2;
        assert!(check_access(Access::Download { offset: near_max }, 4, 8).is_err());
        let aligned = usize::MAX - (usize::MAX % VIEW_ALIGN);
        assert!(check_view(aligned, VIEW_ALIGN, 2 * VIEW_ALIGN).is_err());
    }

    #[test]
    fn views_must_be_aligned_non_empty_and_inside() {
        assert!(check_view(VIEW_ALIGN, 16, 2 * VIEW_ALIGN).is_ok());
        assert!(check_view(0, 0, VIEW_ALIGN).is_err());
        assert!(check_view(1, 16, 2 * VIEW_ALIGN).is_err());
        assert!(check_view(VIEW_ALIGN, VIEW_ALIGN + 1, 2 * VIEW_ALIGN).is_err());
    }

    #[test]
    fn copies_refuse_the_same_buffer_and_more_than_the_smaller_holds() {
        assert!(check_copy(8, 8, 16).unwrap());
        assert!(!check_copy(0, 8, 16).unwrap());
        assert!(check_distinct(BufferId(1), BufferId(1)).is_err());
        assert!(check_distinct(BufferId(1), BufferId(2)).is_ok());
        let e = check_copy(9, 8, 16).unwrap_err().to_string();
        assert!(
            e.contains("copy of 9 bytes between buffers of 8 and 16 bytes"),
            "{e}"
        );
        assert!(check_alloc(0).is_err() && check_alloc(1).is_ok());
    }
}

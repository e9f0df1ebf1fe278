//! Errors: every failed C call becomes an [`Error`] carrying the status and the message.

use std::ffi::CStr;
use std::fmt;

use tinymlir_sys as sys;

/// What kind of failure, mapped from the C API's `tm_status`.
///
/// Non-exhaustive because the C enum is append-only: a newer library may add statuses,
/// which arrive as [`ErrorKind::Unknown`] until this crate names them.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Null pointer, bad count, use after end, a Rust slice too short for its shape, ...
    InvalidArgument,
    /// Shapes do not agree (at an op or at invoke).
    Shape,
    /// Element types do not agree or are unsupported.
    DType,
    /// An index (axis, gather index, token id) outside its range.
    OutOfRange,
    /// MLIR/LLVM rejected the program; the message has the diagnostics.
    Compile,
    /// Failure while running compiled code.
    Runtime,
    /// A valid request this build cannot serve (e.g. the GPU target).
    Unsupported,
    /// A file missing, unreadable or malformed.
    Io,
    /// Allocation failed.
    OutOfMemory,
    /// The object is in use by another call: a model's `logits`, `generate` or `stats`
    /// while another of them runs on it (on another thread, or from a `generate` callback).
    /// Nothing was changed; try again once that call has returned.
    Busy,
    /// A status this crate does not know (from a newer library).
    Unknown(u32),
}

impl ErrorKind {
    // tm_status is a C enum: u32 here, i32 with other compilers; the casts keep it portable.
    #[allow(clippy::unnecessary_cast)]
    fn from_status(status: sys::tm_status) -> ErrorKind {
        match status {
            sys::TM_ERROR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::TM_ERROR_SHAPE => ErrorKind::Shape,
            sys::TM_ERROR_DTYPE => ErrorKind::DType,
            sys::TM_ERROR_OUT_OF_RANGE => ErrorKind::OutOfRange,
            sys::TM_ERROR_COMPILE => ErrorKind::Compile,
            sys::TM_ERROR_RUNTIME => ErrorKind::Runtime,
            sys::TM_ERROR_UNSUPPORTED => ErrorKind::Unsupported,
            sys::TM_ERROR_IO => ErrorKind::Io,
            sys::TM_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            sys::TM_ERROR_BUSY => ErrorKind::Busy,
            other => ErrorKind::Unknown(other as u32),
        }
    }

    /// The C status this kind stands for (`TM_ERROR_SHAPE` is 2, ...).
    #[allow(clippy::unnecessary_cast)]
    pub fn status(self) -> u32 {
        (match self {
            ErrorKind::InvalidArgument => sys::TM_ERROR_INVALID_ARGUMENT,
            ErrorKind::Shape => sys::TM_ERROR_SHAPE,
            ErrorKind::DType => sys::TM_ERROR_DTYPE,
            ErrorKind::OutOfRange => sys::TM_ERROR_OUT_OF_RANGE,
            ErrorKind::Compile => sys::TM_ERROR_COMPILE,
            ErrorKind::Runtime => sys::TM_ERROR_RUNTIME,
            ErrorKind::Unsupported => sys::TM_ERROR_UNSUPPORTED,
            ErrorKind::Io => sys::TM_ERROR_IO,
            ErrorKind::OutOfMemory => sys::TM_ERROR_OUT_OF_MEMORY,
            ErrorKind::Busy => sys::TM_ERROR_BUSY,
            ErrorKind::Unknown(status) => return status,
        }) as u32
    }
}

/// A failed call: its [`ErrorKind`] and the library's message (which names the op, the
/// shapes or the file involved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error raised by this crate itself, before any C call (e.g. a slice shorter than
    /// its shape). Uses the status the library would have used.
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }

    /// What kind of failure it was (one kind per C status).
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The C status (`tm_status`) of the failure.
    pub fn status(&self) -> u32 {
        self.kind.status()
    }

    /// The message: the library's `tm_last_error()` for the failed call, or this crate's.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tm_status_string's names ("TM_ERROR_SHAPE"), so messages read the same in every
        // language.
        let name = unsafe { CStr::from_ptr(sys::tm_status_string(self.kind.status() as _)) };
        write!(f, "{}: {}", name.to_string_lossy(), self.message)
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns a status into a `Result`. Call it right after the C call: the message is the
/// calling thread's `tm_last_error`, valid only until the next failing call, so it is
/// copied at once.
pub(crate) fn check(status: sys::tm_status) -> Result<()> {
    if status == sys::TM_OK {
        return Ok(());
    }
    let message = unsafe { CStr::from_ptr(sys::tm_last_error()) }.to_string_lossy().into_owned();
    Err(Error { kind: ErrorKind::from_status(status), message })
}

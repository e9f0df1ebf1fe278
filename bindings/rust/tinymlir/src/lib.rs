//! Safe Rust bindings for tinymlir, a small tensor compiler on MLIR/LLVM.
//!
//! Trace a program op by op, compile it (fused, bufferized, JIT-compiled), and invoke it on
//! your own slices:
//!
//! ```no_run
//! use tinymlir::{Context, DType, TensorMut, TensorRef, Trace};
//!
//! let ctx = Context::new()?;
//! let t = Trace::new(&ctx, "affine")?;
//! let x = t.input(DType::F32, &[2, 4])?;
//! let g = t.input(DType::F32, &[4])?;
//! let y = t.mul(t.add(t.mul(x, g)?, g)?, t.scalar(DType::F32, 0.5)?)?;
//! t.end(&[y])?;
//! let program = ctx.compile(&t)?;
//! let (xs, gs, mut ys) = ([1f32; 8], [2f32; 4], [0f32; 8]);
//! program.invoke(
//!     &[TensorRef::new(&xs, &[2, 4])?, TensorRef::new(&gs, &[4])?],
//!     &mut [TensorMut::new(&mut ys, &[2, 4])?],
//! )?;
//! # Ok::<(), tinymlir::Error>(())
//! ```
//!
//! Ownership and thread safety follow the C API (`tinymlir/tinymlir.h`, `tinymlir/gpt2.h`):
//! [`Context`], [`Program`] and [`Model`] are `Send + Sync` ([`Model`] calls that would
//! overlap fail with [`ErrorKind::Busy`]); [`Trace`] is `Send` only; a [`Model`] keeps its
//! own reference to its context, which may be dropped first; every failure is an [`Error`]
//! with the library's message.
#![warn(missing_docs)]

mod context;
mod device;
mod error;
mod model;
mod program;
mod tensor;
mod trace;

pub use context::{CacheStats, Context};
pub use device::DeviceBuffer;
pub use error::{Error, ErrorKind, Result};
pub use model::{GenerateOptions, Model, ModelInfo, ModelOptions, ModelStats};
pub use program::{CompileOptions, Program, Stage, Target};
pub use tensor::{Bf16, DType, Element, TensorMut, TensorRef, TensorType, F16, MAX_RANK};
pub use trace::{Trace, Value};

/// Re-exported raw declarations, for what the safe API does not cover.
pub use tinymlir_sys as sys;

/// The loaded library's version, e.g. "1.0.0" (`tm_version`, read at run time: the one
/// version of the project, which this crate's own version equals).
pub fn version() -> &'static str {
    // A static string in the library (tm_version: "Static; never NULL").
    unsafe { std::ffi::CStr::from_ptr(sys::tm_version()) }.to_str().unwrap_or("?")
}

/// The loaded library's ABI version (compared with the header's by [`Context::new`]).
pub fn api_version() -> u32 {
    unsafe { sys::tm_api_version() }
}

// The README's examples are compiled (and the first one run) as doctests, so they stay true.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// What the types forbid, checked by compiling counter-examples.
///
/// A trace is not `Sync` (one thread at a time):
/// ```compile_fail,E0277
/// fn shared<T: Sync>() {}
/// shared::<tinymlir::Trace>();
/// ```
#[cfg(doctest)]
pub struct CompileFailTests;

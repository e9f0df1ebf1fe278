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
//! Ownership and thread safety follow the C API (`tinymlir/tinymlir.h`): [`Context`] and
//! [`Program`] are `Send + Sync`; [`Trace`] and [`Model`] are `Send` only; a [`Model`]
//! borrows its context; every failure is an [`Error`] with the library's message.

mod context;
mod error;
mod model;
mod program;
mod tensor;
mod trace;

pub use context::{CacheStats, Context};
pub use error::{Error, ErrorKind, Result};
pub use model::{GenerateOptions, Model, ModelInfo, ModelStats};
pub use program::{CompileOptions, Program, Stage, Target};
pub use tensor::{DType, Element, TensorMut, TensorRef, TensorType, MAX_RANK};
pub use trace::{Trace, Value};

/// Re-exported raw declarations, for what the safe API does not cover.
pub use tinymlir_sys as sys;

/// The loaded library's version, e.g. "0.1.0".
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
/// A model cannot outlive its context:
/// ```compile_fail,E0597
/// let model = {
///     let ctx = tinymlir::Context::new().unwrap();
///     tinymlir::Model::load(&ctx, "models/kjv-tiny", tinymlir::Target::Cpu).unwrap()
/// };
/// ```
/// A trace is not `Sync` (one thread at a time):
/// ```compile_fail,E0277
/// fn shared<T: Sync>() {}
/// shared::<tinymlir::Trace>();
/// ```
/// Nor is a model (one KV cache):
/// ```compile_fail,E0277
/// fn shared<T: Sync>() {}
/// shared::<tinymlir::Model<'static>>();
/// ```
/// A token callback cannot use its model while it generates:
/// ```compile_fail,E0499
/// # fn f(model: &mut tinymlir::Model<'_>) -> tinymlir::Result<()> {
/// let options = tinymlir::GenerateOptions::default();
/// let mut cb = |_t: i32| model.tokenize("x").is_ok();
/// model.generate(&[1], &options, Some(&mut cb))?;
/// # Ok(()) }
/// ```
#[cfg(doctest)]
pub struct CompileFailTests;

//! Compiled programs: immutable, reference-counted, invoked on caller-owned buffers.

use std::ffi::CString;
use std::path::Path;
use std::ptr;

use tinymlir_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::tensor::{DType, TensorMut, TensorRef, TensorType, MAX_RANK};

/// Where a program runs.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Target {
    /// This machine's CPU (the default).
    #[default]
    Cpu,
    /// Fails with [`ErrorKind::Unsupported`] in builds without a GPU target.
    Gpu,
}

impl Target {
    pub(crate) fn raw(self) -> sys::tm_target {
        match self {
            Target::Cpu => sys::TM_TARGET_CPU,
            Target::Gpu => sys::TM_TARGET_GPU,
        }
    }
}

/// A compilation stage whose text a program keeps (see [`Program::ir`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The module as built from the trace, before any pass.
    Traced,
    /// After canonicalize, cse and elementwise fusion.
    Optimized,
    /// After one-shot bufferization and deallocation.
    Bufferized,
    /// After the target step (BLAS rewrite) and LLVM lowering.
    Lowered,
    /// The LLVM IR module handed to the JIT.
    LlvmIr,
    /// Native assembly (CPU) or PTX (GPU).
    Assembly,
}

impl Stage {
    fn raw(self) -> sys::tm_stage {
        match self {
            Stage::Traced => sys::TM_STAGE_TRACED,
            Stage::Optimized => sys::TM_STAGE_OPTIMIZED,
            Stage::Bufferized => sys::TM_STAGE_BUFFERIZED,
            Stage::Lowered => sys::TM_STAGE_LOWERED,
            Stage::LlvmIr => sys::TM_STAGE_LLVM_IR,
            Stage::Assembly => sys::TM_STAGE_ASSEMBLY,
        }
    }
}

/// Compilation options; `Default` is the library's defaults (`tm_compile_options_init`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    /// Where the program runs.
    pub target: Target,
    /// Run canonicalize/cse/elementwise fusion.
    pub optimize: bool,
    /// Turn matmuls into cblas_sgemm/dgemm calls.
    pub use_blas: bool,
    /// LLVM optimisation level, 0..=3.
    pub opt_level: i32,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        let mut raw = std::mem::MaybeUninit::<sys::tm_compile_options>::zeroed();
        // SAFETY: the init function fills every field.
        let raw = unsafe {
            sys::tm_compile_options_init_size(raw.as_mut_ptr(), std::mem::size_of::<sys::tm_compile_options>());
            raw.assume_init()
        };
        CompileOptions {
            target: if raw.target == sys::TM_TARGET_GPU { Target::Gpu } else { Target::Cpu },
            optimize: raw.optimize != 0,
            use_blas: raw.use_blas != 0,
            opt_level: raw.opt_level,
        }
    }
}

impl CompileOptions {
    pub(crate) fn raw(&self) -> sys::tm_compile_options {
        // Start from init so struct_size (and any field we do not expose) is right.
        let mut raw = std::mem::MaybeUninit::<sys::tm_compile_options>::zeroed();
        let mut raw = unsafe {
            sys::tm_compile_options_init_size(raw.as_mut_ptr(), std::mem::size_of::<sys::tm_compile_options>());
            raw.assume_init()
        };
        raw.target = self.target.raw();
        raw.optimize = self.optimize as i32;
        raw.use_blas = self.use_blas as i32;
        raw.opt_level = self.opt_level;
        raw
    }
}

/// A compiled program. Immutable: `invoke` may run on several threads at once, so it is
/// `Send + Sync`. `Clone` adds a reference (`tm_program_retain`); the program outlives the
/// context and trace it came from.
#[derive(Debug)]
pub struct Program {
    raw: *mut sys::tm_program,
}

// SAFETY: tinymlir.h: "tm_program is immutable after compilation: tm_invoke may run
// concurrently on the same program from several threads."
unsafe impl Send for Program {}
unsafe impl Sync for Program {}

impl Program {
    /// Takes ownership of one reference.
    pub(crate) unsafe fn from_raw(raw: *mut sys::tm_program) -> Program {
        Program { raw }
    }

    /// Writes the program to `path` as one self-contained file (`tm_program_export`).
    pub fn export(&self, path: impl AsRef<Path>) -> Result<()> {
        let c_path = c_path(path.as_ref())?;
        check(unsafe { sys::tm_program_export(self.raw, c_path.as_ptr()) })
    }

    /// A program written by [`Program::export`], linked without the compiler
    /// (`tm_program_load`).
    pub fn load(path: impl AsRef<Path>) -> Result<Program> {
        let c_path = c_path(path.as_ref())?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::tm_program_load(c_path.as_ptr(), &mut raw) })?;
        Ok(Program { raw })
    }

    /// Whether the compile that returned this program found it in the context's cache
    /// (compiled earlier for an equal trace and equal options) rather than compiling it
    /// (`tm_program_cache_hit`). A clone answers as the program it was cloned from.
    pub fn cache_hit(&self) -> bool {
        unsafe { sys::tm_program_cache_hit(self.raw) != 0 }
    }

    /// How many inputs [`Program::invoke`] takes.
    pub fn num_inputs(&self) -> usize {
        unsafe { sys::tm_program_num_inputs(self.raw) as usize }
    }

    /// How many outputs [`Program::invoke`] writes.
    pub fn num_outputs(&self) -> usize {
        unsafe { sys::tm_program_num_outputs(self.raw) as usize }
    }

    /// The type input `i` is specialised to.
    pub fn input_type(&self, i: usize) -> Result<TensorType> {
        self.io_type(i, "input", self.num_inputs(), sys::tm_program_input_type)
    }

    /// The type output `i` is specialised to.
    pub fn output_type(&self, i: usize) -> Result<TensorType> {
        self.io_type(i, "output", self.num_outputs(), sys::tm_program_output_type)
    }

    fn io_type(
        &self,
        i: usize,
        what: &str,
        count: usize,
        f: unsafe extern "C" fn(
            *const sys::tm_program,
            i32,
            *mut sys::tm_dtype,
            *mut i32,
            *mut i64,
        ) -> sys::tm_status,
    ) -> Result<TensorType> {
        let i = i32::try_from(i).map_err(|_| {
            Error::new(
                ErrorKind::OutOfRange,
                format!("Program::{what}_type: index {i} is out of range: the program has {count} {what}s"),
            )
        })?;
        let (mut dtype, mut rank, mut shape) = (0, 0, [0i64; MAX_RANK]);
        check(unsafe { f(self.raw, i, &mut dtype, &mut rank, shape.as_mut_ptr()) })?;
        Ok(TensorType { dtype: DType::from_raw(dtype)?, shape: shape[..rank as usize].to_vec() })
    }

    /// The text of one compilation stage.
    pub fn ir(&self, stage: Stage) -> Result<String> {
        // tm_program_ir_text: the size first, then the text into our buffer.
        let mut len = 0usize;
        check(unsafe { sys::tm_program_ir_text(self.raw, stage.raw(), ptr::null_mut(), 0, &mut len) })?;
        let mut buf = vec![0u8; len + 1];
        check(unsafe {
            sys::tm_program_ir_text(self.raw, stage.raw(), buf.as_mut_ptr().cast(), buf.len(), &mut len)
        })?;
        buf.truncate(len);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Runs the program: reads `inputs`, writes `outputs`. Each view must match the
    /// program's specialisation (dtype, rank, shape); the library checks before running
    /// native code. Nothing is retained after the call.
    pub fn invoke(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let count = |n: usize| {
            i32::try_from(n).map_err(|_| Error::new(ErrorKind::InvalidArgument, format!("{n} tensors")))
        };
        let (n_in, n_out) = (count(inputs.len())?, count(outputs.len())?);
        // The tm_tensor views point into the TensorRef/TensorMut values, which stay borrowed
        // (and so in place) until this function returns.
        let raw_in: Vec<sys::tm_tensor> = inputs.iter().map(TensorRef::raw).collect();
        let raw_out: Vec<sys::tm_tensor> = outputs.iter_mut().map(TensorMut::raw).collect();
        check(unsafe { sys::tm_invoke(self.raw, raw_in.as_ptr(), n_in, raw_out.as_ptr(), n_out) })
    }
}

impl Clone for Program {
    fn clone(&self) -> Program {
        unsafe { sys::tm_program_retain(self.raw) };
        Program { raw: self.raw }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        unsafe { sys::tm_program_release(self.raw) }
    }
}

fn c_path(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::new(ErrorKind::InvalidArgument, format!("path {path:?} contains a NUL byte")))
}

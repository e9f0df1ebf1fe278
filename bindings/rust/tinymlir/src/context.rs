//! The context: owner of the compiled-program cache, and the entry point of compilation.

use std::ptr;

use tinymlir_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::program::{CompileOptions, Program};
use crate::trace::Trace;

/// A compilation context and its program cache. Thread-safe (the C API allows compiles
/// from several threads on one context), so it is `Send + Sync`; share it with `&` or `Arc`.
/// Models and programs keep their own references to what they need, so a context may be
/// dropped before them.
#[derive(Debug)]
pub struct Context {
    raw: *mut sys::tm_context,
}

// SAFETY: tinymlir.h: "tm_context is thread-safe (compiles from several threads may share it)".
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

/// The cache's counters (see [`Context::cache_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Compiles answered from the cache.
    pub hits: u64,
    /// Compiles that built a program.
    pub misses: u64,
    /// Programs currently cached.
    pub entries: u64,
}

impl Context {
    /// Creates a context. Fails with [`ErrorKind::Unsupported`] when the loaded library's
    /// ABI is not the one of the header this crate was generated from: another major version,
    /// or fewer additions (`TM_API_VERSION` is 1000 * major + minor).
    pub fn new() -> Result<Context> {
        let loaded = unsafe { sys::tm_api_version() };
        let built = sys::TM_API_VERSION;
        if loaded / 1000 != built / 1000 || loaded < built {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "libtinymlir has ABI version {loaded}, these bindings were built for {}",
                    sys::TM_API_VERSION
                ),
            ));
        }
        let mut raw = ptr::null_mut();
        check(unsafe { sys::tm_context_create(&mut raw) })?;
        Ok(Context { raw })
    }

    /// Compiles an ended trace with the default options (CPU, fusion, BLAS, -O3), or
    /// returns the cached program for an equal trace.
    pub fn compile(&self, trace: &Trace) -> Result<Program> {
        self.compile_with(trace, &CompileOptions::default())
    }

    /// Compiles an ended trace with `options`.
    pub fn compile_with(&self, trace: &Trace, options: &CompileOptions) -> Result<Program> {
        let raw_options = options.raw();
        let mut out = ptr::null_mut();
        check(unsafe { sys::tm_compile(self.raw, trace.as_raw(), &raw_options, &mut out) })?;
        // SAFETY: tm_compile handed us one reference, which Program now owns.
        Ok(unsafe { Program::from_raw(out) })
    }

    /// The cache's hit, miss and entry counts.
    pub fn cache_stats(&self) -> Result<CacheStats> {
        // SAFETY: all-zero is a valid tm_cache_info; struct_size says how much is ours.
        let mut info: sys::tm_cache_info = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::tm_cache_info>() as u32;
        check(unsafe { sys::tm_cache_get_info(self.raw, &mut info) })?;
        Ok(CacheStats { hits: info.hits, misses: info.misses, entries: info.entries })
    }

    pub(crate) fn as_raw(&self) -> *mut sys::tm_context {
        self.raw
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // Drops this reference: programs still held elsewhere stay valid (the cache only
        // drops its references), and models keep the context alive with their own.
        unsafe { sys::tm_context_release(self.raw) }
    }
}

//! Raw FFI declarations for libtinymlir, generated at build time by `bindgen` from the
//! installed `tinymlir/gpt2.h` and what it includes (`tinymlir/tinymlir.h`,
//! `tinymlir/version.h`). Every function is `unsafe`; the contract of each one (ownership,
//! errors, thread safety) is written above it in those headers. Use the `tinymlir` crate for
//! a safe interface.
// missing_docs: the declarations are the C headers', documented there (the crate docs
// above say where); bindgen copies no plain C comments.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_library_agree() {
        // The ABI check every binding makes: the header we were generated from against the
        // library we linked.
        assert_eq!(unsafe { tm_api_version() }, TM_API_VERSION);
    }

    #[test]
    fn versions_are_one() {
        // One version: the CMake project's, in the header, the library and this crate.
        let header = std::ffi::CStr::from_bytes_with_nul(TM_VERSION_STRING).unwrap();
        let library = unsafe { std::ffi::CStr::from_ptr(tm_version()) };
        assert_eq!(header.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        assert_eq!(library.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}

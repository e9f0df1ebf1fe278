//! Raw FFI declarations for libtinymlir, generated at build time by `bindgen` from the
//! installed `tinymlir/tinymlir.h`. Every function is `unsafe`; the contract of each one
//! (ownership, errors, thread safety) is written above it in that header. Use the `tinymlir`
//! crate for a safe interface.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

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
}

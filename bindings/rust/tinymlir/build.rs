//! Puts libtinymlir's folder (found by tinymlir-sys, handed over as DEP_TINYMLIR_LIBDIR) in
//! the RPATH of this crate's tests and examples, so they run without LD_LIBRARY_PATH.
//! Cargo does not pass a dependency's link arguments on, hence this forwarding.
fn main() {
    if let Some(dirs) = std::env::var_os("DEP_TINYMLIR_LIBDIR") {
        for dir in std::env::split_paths(&dirs) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
}

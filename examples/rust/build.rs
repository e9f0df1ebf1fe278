// Cargo does not pass a dependency's link arguments on to binaries, so the binary asks
// tinymlir-sys where libtinymlir is (DEP_TINYMLIR_LIBDIR) and puts that in its RPATH: it then
// runs without LD_LIBRARY_PATH.
fn main() {
    if let Some(dirs) = std::env::var_os("DEP_TINYMLIR_LIBDIR") {
        for dir in std::env::split_paths(&dirs) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
}

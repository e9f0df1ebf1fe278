//! Finds libtinymlir and generates the raw declarations from its installed headers.
//!
//! Where the library is: `TINYMLIR_DIR` (a prefix with include/ and lib/) if set, else the
//! `pkg-config` command (`tinymlir.pc`, found through PKG_CONFIG_PATH). The declarations are
//! generated at build time by Debian's `bindgen` command-line tool (override with `BINDGEN`)
//! from the very headers the library was installed with (`tinymlir/gpt2.h`, which includes
//! `tinymlir/tinymlir.h` and the generated `tinymlir/version.h`), so they cannot drift from
//! them.
//! No crate dependencies: everything here is std and external commands.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Library {
    include_dirs: Vec<PathBuf>,
    lib_dirs: Vec<PathBuf>,
}

fn main() {
    // TINYMLIR_HEADER_STAMP: a checksum of the headers' contents, which the project's own
    // tests pass. Installing preserves the headers' modification times, so an edited header
    // can be older than the last generated bindings and rerun-if-changed alone misses it.
    for var in ["TINYMLIR_DIR", "PKG_CONFIG_PATH", "BINDGEN", "TINYMLIR_HEADER_STAMP"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let lib = match env::var_os("TINYMLIR_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            Library { include_dirs: vec![dir.join("include")], lib_dirs: vec![dir.join("lib")] }
        }
        None => from_pkg_config(),
    };

    // gpt2.h declares the model API and includes the rest (tinymlir.h, version.h).
    let dir = lib
        .include_dirs
        .iter()
        .map(|d| d.join("tinymlir"))
        .find(|d| d.join("gpt2.h").is_file())
        .unwrap_or_else(|| fail(&format!("tinymlir/gpt2.h not found under {:?}", lib.include_dirs)));
    for name in ["gpt2.h", "tinymlir.h", "version.h"] {
        println!("cargo:rerun-if-changed={}", dir.join(name).display());
    }
    generate_bindings(&dir.join("gpt2.h"), &lib.include_dirs);

    for dir in &lib.lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
        // rustc-link-arg only reaches this package's own tests; dependents read
        // DEP_TINYMLIR_LIBDIR (below) and add the same RPATH to their binaries.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=tinymlir");
    let joined = env::join_paths(&lib.lib_dirs).expect("library paths contain the separator");
    println!("cargo:libdir={}", joined.to_string_lossy());
    println!("cargo:include={}", lib.include_dirs[0].display());
}

/// Asks `pkg-config` for the include and library folders of `tinymlir`.
fn from_pkg_config() -> Library {
    let out = Command::new("pkg-config")
        .args(["--cflags", "--libs", "tinymlir"])
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run pkg-config: {e}")));
    if !out.status.success() {
        fail(&format!(
            "pkg-config cannot find tinymlir (set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig \
             or TINYMLIR_DIR to <prefix>):\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let flags = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lib = Library { include_dirs: Vec::new(), lib_dirs: Vec::new() };
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-I") {
            lib.include_dirs.push(canonical(dir));
        } else if let Some(dir) = flag.strip_prefix("-L") {
            lib.lib_dirs.push(canonical(dir));
        }
    }
    if lib.include_dirs.is_empty() {
        // A .pc installed into /usr leaves -I out; the header is then on the default path.
        lib.include_dirs.push(PathBuf::from("/usr/include"));
    }
    lib
}

/// The relocatable .pc gives paths like <prefix>/lib/pkgconfig/../../lib; a clean path reads
/// better in RPATHs and error messages.
fn canonical(dir: &str) -> PathBuf {
    Path::new(dir).canonicalize().unwrap_or_else(|_| PathBuf::from(dir))
}

fn generate_bindings(header: &Path, include_dirs: &[PathBuf]) {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("bindings.rs");
    let bindgen = env::var_os("BINDGEN").unwrap_or_else(|| "bindgen".into());
    let mut cmd = Command::new(&bindgen);
    cmd.arg(header)
        .args(["--allowlist-function", "tm_.*", "--allowlist-type", "tm_.*"])
        .args(["--allowlist-var", "TM_.*"])
        // TM_OK rather than tm_status_TM_OK: the C names, unchanged.
        .arg("--no-prepend-enum-name")
        .arg("--size_t-is-usize")
        .arg("-o")
        .arg(&out)
        .arg("--");
    for dir in include_dirs {
        cmd.arg(format!("-I{}", dir.display()));
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run {:?} (Debian package `bindgen`): {e}", bindgen)));
    if !status.success() {
        fail(&format!("{:?} failed on {}", bindgen, header.display()));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("tinymlir-sys: {message}");
    std::process::exit(1);
}

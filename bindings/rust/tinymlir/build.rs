//! Two things the safe crate takes from the library it binds:
//! - libtinymlir's folder (found by tinymlir-sys, handed over as DEP_TINYMLIR_LIBDIR) in the
//!   RPATH of this crate's tests and examples, so they run without LD_LIBRARY_PATH (Cargo
//!   does not pass a dependency's link arguments on, hence this forwarding);
//! - one `Trace` method per unary op of the header's `tm_unary_op` enum (the header that
//!   tinymlir-sys found, DEP_TINYMLIR_INCLUDE), written to $OUT_DIR/unary_ops.rs: an op
//!   added to the library's table is a method here with no change to this crate.
use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    if let Some(dirs) = env::var_os("DEP_TINYMLIR_LIBDIR") {
        for dir in env::split_paths(&dirs) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
    let include = env::var_os("DEP_TINYMLIR_INCLUDE").expect("tinymlir-sys exports its include dir");
    let header = PathBuf::from(include).join("tinymlir").join("tinymlir.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let text = fs::read_to_string(&header)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", header.display()));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("unary_ops.rs");
    fs::write(&out, unary_methods(&text)).expect("cannot write unary_ops.rs");
}

/// `impl Trace { pub fn <name>(..) }` for each `TM_UNARY_<NAME> = <value>, /* <doc> */` line
/// of the `tm_unary_op` enum.
fn unary_methods(header: &str) -> String {
    let start = header.find("typedef TM_ENUM(tm_unary_op) {").expect("tinymlir.h has tm_unary_op");
    let end = start + header[start..].find("} tm_unary_op;").expect("tm_unary_op ends");
    let mut code = String::from("impl Trace {\n");
    for line in header[start..end].lines().skip(1) {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("TM_UNARY_") else { continue };
        let enumerator = format!("TM_UNARY_{}", rest.split(|c: char| c == ' ' || c == '=').next().unwrap());
        let name = enumerator["TM_UNARY_".len()..].to_lowercase();
        let doc = line
            .find("/*")
            .map(|at| line[at + 2..].trim_end_matches("*/").trim().to_string())
            .unwrap_or_else(|| name.clone());
        code += &format!(
            "    /// {doc} (`tm_op_unary` with `{enumerator}`).\n    pub fn {name}(&self, x: Value) -> Result<Value> {{\n        self.unary(sys::{enumerator}, x)\n    }}\n"
        );
    }
    code + "}\n"
}

//! Two things the safe crate takes from the library it binds:
//! - libtinymlir's folder (found by tinymlir-sys, handed over as DEP_TINYMLIR_LIBDIR) in the
//!   RPATH of this crate's tests and examples, so they run without LD_LIBRARY_PATH (Cargo
//!   does not pass a dependency's link arguments on, hence this forwarding);
//! - one `Trace` method per unary op of the header's `tm_unary_op` enum (the header that
//!   tinymlir-sys found, DEP_TINYMLIR_INCLUDE), written to $OUT_DIR/unary_ops.rs, and one
//!   per op of `ops.h`'s `tm_op_kind`, typed from its signature, written to
//!   $OUT_DIR/table_ops.rs: an op added to the library's tables is a method here with no
//!   change to this crate.
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
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out_dir.join("unary_ops.rs"), unary_methods(&text)).expect("cannot write unary_ops.rs");
    let ops = header.with_file_name("ops.h");
    println!("cargo:rerun-if-changed={}", ops.display());
    let ops_text =
        fs::read_to_string(&ops).unwrap_or_else(|e| panic!("cannot read {}: {e}", ops.display()));
    fs::write(out_dir.join("table_ops.rs"), table_methods(&ops_text)).expect("cannot write table_ops.rs");
}

/// The enumerators of `ops.h`'s `tm_op_kind`: (C name, signature, what it computes), each an
/// enumerator on a line of its own and then a comment `signature: doc`.
fn table_ops(header: &str) -> Vec<(String, String, String)> {
    let start = header.find("typedef TM_ENUM(tm_op_kind) {").expect("ops.h has tm_op_kind");
    let end = start + header[start..].find("} tm_op_kind;").expect("tm_op_kind ends");
    let mut ops: Vec<(String, String)> = Vec::new();
    for line in header[start..end].lines().skip(1) {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("TM_OP_") {
            let name = rest.split(|c: char| c == ' ' || c == '=').next().unwrap();
            ops.push((format!("TM_OP_{name}"), String::new()));
        } else if let Some(last) = ops.last_mut() {
            let text = line.trim_start_matches("/*").trim_start_matches('*').trim_end_matches("*/").trim();
            if !text.is_empty() {
                if !last.1.is_empty() {
                    last.1.push(' ');
                }
                last.1.push_str(text);
            }
        }
    }
    ops.into_iter()
        .map(|(c, comment)| {
            let at = comment.find("): ").unwrap_or_else(|| panic!("{c}'s comment has no signature"));
            (c, comment[..=at].to_string(), comment[at + 3..].to_string())
        })
        .collect()
}

/// `impl Trace { pub fn <name>(..) }` for each op of `ops.h`: its values as `Value` (or
/// `&[Value]`), its attributes as `i64`, `bool`, `DType`, `&[i64]` (`Option<&[i64]>` when the
/// signature gives an empty default, None being it) or `f64`, recorded through `Trace::op`.
fn table_methods(header: &str) -> String {
    let mut code = String::from("impl Trace {\n");
    for (enumerator, signature, doc) in table_ops(header) {
        let open = signature.find('(').unwrap();
        let mut name = signature[..open].to_string();
        if name == "where" {
            name = "where_".to_string();
        }
        let (mut args, mut values, mut scalars, mut lists, mut real) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), "0.0".to_string());
        let mut variadic = None;
        for item in signature[open + 1..signature.len() - 1].split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (item, default) = match item.split_once('=') {
                Some((i, d)) => (i.trim(), Some(d.trim())),
                None => (item, None),
            };
            let (p, kind) = match item.split_once(':') {
                Some((p, k)) => (p.trim().to_string(), k.trim()),
                None => (item.to_string(), "value"),
            };
            match kind {
                "value" => {
                    args.push(format!("{p}: Value"));
                    values.push(format!("{p}"));
                }
                "values" => {
                    args.push(format!("{p}: &[Value]"));
                    variadic = Some(p.clone());
                }
                "int" => {
                    args.push(format!("{p}: i64"));
                    scalars.push(p.clone());
                }
                "bool" => {
                    args.push(format!("{p}: bool"));
                    scalars.push(format!("{p} as i64"));
                }
                "dtype" => {
                    args.push(format!("{p}: DType"));
                    scalars.push(format!("{p}.raw() as i64"));
                }
                "ints" if default == Some("()") => {
                    args.push(format!("{p}: Option<&[i64]>"));
                    lists.push(format!("{p}.unwrap_or(&[])"));
                }
                "ints" => {
                    args.push(format!("{p}: &[i64]"));
                    lists.push(p.clone());
                }
                "real" => {
                    args.push(format!("{p}: f64"));
                    real = p.clone();
                }
                other => panic!("{signature}: unknown parameter kind {other}"),
            }
        }
        let values = variadic.unwrap_or_else(|| format!("&[{}]", values.join(", ")));
        // Brackets in the header's text (x[begin:end]) are text, not rustdoc links.
        let doc = doc.replace('[', "\\[").replace(']', "\\]");
        code += &format!("    /// `{signature}`: {doc} (`tm_op` with `{enumerator}`).\n");
        if name == "where_" {
            code += "    #[doc(alias = \"where\")]\n";
        }
        code += &format!("    pub fn {name}(&self, {}) -> Result<Value> {{\n", args.join(", "));
        let binding = if lists.is_empty() { "let" } else { "let mut" };
        code += &format!("        {binding} ints: Vec<i64> = vec![{}];\n", scalars.join(", "));
        if lists.len() > 1 {
            let first = &lists[0];
            for other in &lists[1..] {
                code += &format!(
                    "        if {first}.len() != {other}.len() {{\n            return Err(Error::new(ErrorKind::InvalidArgument, format!(\"{name}: lists of {{}} and {{}} entries\", {first}.len(), {other}.len())));\n        }}\n"
                );
            }
        }
        for list in &lists {
            code += &format!("        ints.extend_from_slice({list});\n");
        }
        code += &format!("        self.op(sys::{enumerator}, {values}, &ints, {real})\n    }}\n");
    }
    code + "}\n"
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

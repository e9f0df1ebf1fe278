//! The affine example, (x * gain + bias) * 0.5: three elementwise ops trace to three
//! linalg.generic, fusion makes one; values, types, cache hits and program clones.

use tinymlir::{Context, DType, Program, Stage, TensorMut, TensorRef, TensorType, Trace};

const XS: [f32; 8] = [-2., -1., 0., 1., 2., 3., 4., 5.];
const GAIN: [f32; 4] = [1., 2., 3., 4.];
const BIAS: [f32; 4] = [0.5, 0., -1., 2.];

fn affine_trace(ctx: &Context) -> tinymlir::Result<Trace> {
    let t = Trace::new(ctx, "affine_activation")?;
    let x = t.input(DType::F32, &[2, 4])?;
    let gain = t.input(DType::F32, &[4])?;
    let bias = t.input(DType::F32, &[4])?;
    let half = t.scalar(DType::F32, 0.5)?;
    let y = t.mul(t.add(t.mul(x, gain)?, bias)?, half)?;
    t.end(&[y])?;
    Ok(t)
}

fn run(program: &Program) -> tinymlir::Result<[f32; 8]> {
    let mut ys = [0f32; 8];
    program.invoke(
        &[TensorRef::new(&XS, &[2, 4])?, TensorRef::new(&GAIN, &[4])?, TensorRef::new(&BIAS, &[4])?],
        &mut [TensorMut::new(&mut ys, &[2, 4])?],
    )?;
    Ok(ys)
}

#[test]
fn three_generics_fuse_into_one() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let program = ctx.compile(&affine_trace(&ctx)?)?;
    let count = |stage| program.ir(stage).map(|ir| ir.matches("linalg.generic").count());
    assert_eq!(count(Stage::Traced)?, 3);
    assert_eq!(count(Stage::Optimized)?, 1);
    Ok(())
}

#[test]
fn values_match_the_formula() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let program = ctx.compile(&affine_trace(&ctx)?)?;
    let ys = run(&program)?;
    for (i, y) in ys.iter().enumerate() {
        let expected = (XS[i] * GAIN[i % 4] + BIAS[i % 4]) * 0.5;
        assert!((y - expected).abs() <= 1e-6, "y[{i}] = {y}, expected {expected}");
    }
    Ok(())
}

#[test]
fn program_types_cache_and_clones() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let trace = affine_trace(&ctx)?;
    let program = ctx.compile(&trace)?;
    assert_eq!((program.num_inputs(), program.num_outputs()), (3, 1));
    assert_eq!(program.input_type(1)?, TensorType { dtype: DType::F32, shape: vec![4] });
    assert_eq!(program.output_type(0)?, TensorType { dtype: DType::F32, shape: vec![2, 4] });
    let err = program.input_type(usize::MAX).unwrap_err();
    assert!(
        err.to_string()
            .contains("input_type: index 18446744073709551615 is out of range: the program has 3 inputs"),
        "{err}"
    );

    // An equal trace is a cache hit; the program outlives trace and context, and a clone
    // (tm_program_retain) outlives the original.
    let again = ctx.compile(&affine_trace(&ctx)?)?;
    let stats = ctx.cache_stats()?;
    assert_eq!((stats.hits, stats.misses, stats.entries), (1, 1, 1));
    drop((trace, program));
    let clone = again.clone();
    drop(again);
    drop(ctx);
    let ys = run(&clone)?;
    assert_eq!(ys[7], (5. * 4. + 2.) * 0.5);
    Ok(())
}

#[test]
fn programs_run_on_several_threads() -> tinymlir::Result<()> {
    // Program is Send + Sync, Context too: compile on one thread, invoke on four.
    let ctx = Context::new()?;
    let program = ctx.compile(&affine_trace(&ctx)?)?;
    let expected = run(&program)?;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| run(&program))).collect();
        for h in handles {
            assert_eq!(h.join().unwrap().unwrap(), expected);
        }
    });
    Ok(())
}

#[test]
fn thread_safety_follows_the_c_api() {
    // Compiles only if these hold; the negative cases are compile_fail doctests in lib.rs.
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<Context>();
    sync::<Context>();
    send::<Program>();
    sync::<Program>();
    send::<Trace>();
    // The library answers overlapping model calls with ErrorKind::Busy, so a model may be
    // shared; it does not borrow its context.
    send::<tinymlir::Model>();
    sync::<tinymlir::Model>();
}

#[test]
fn version_matches_header() {
    assert_eq!(tinymlir::api_version(), tinymlir::sys::TM_API_VERSION);
    assert!(!tinymlir::version().is_empty());
}

#[test]
fn crate_version_is_the_library_version() {
    // One version for the project: the CMake project version, which the library reports at
    // run time and which Cargo.toml's workspace version must repeat.
    assert_eq!(tinymlir::version(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn compiling_an_equal_trace_again_is_a_cache_hit() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let first = ctx.compile(&affine_trace(&ctx)?)?;
    let second = ctx.compile(&affine_trace(&ctx)?)?;
    assert!(!first.cache_hit(), "the first compile compiled");
    assert!(second.cache_hit(), "the second compile found it in the cache");
    assert!(second.clone().cache_hit());
    // Other options are another program.
    let options = tinymlir::CompileOptions { opt_level: 1, ..Default::default() };
    assert!(!ctx.compile_with(&affine_trace(&ctx)?, &options)?.cache_hit());
    Ok(())
}

#[test]
fn exported_programs_load_and_give_the_same_values() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let program = ctx.compile(&affine_trace(&ctx)?)?;
    let dir = std::env::temp_dir().join(format!("tinymlir-rust-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("affine.tmp");
    program.export(&path)?;
    let loaded = Program::load(&path)?;
    assert_eq!(run(&loaded)?, run(&program)?);
    let missing = Program::load(dir.join("missing.tmp")).unwrap_err();
    assert_eq!(missing.kind(), tinymlir::ErrorKind::Io);
    assert!(missing.message().contains("missing.tmp"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
    Ok(())
}

/// A unary op added to the library's table after the named C functions (sigmoid) is a
/// method here too, generated from the header (build.rs).
#[test]
fn sigmoid_is_a_method_and_matches_the_formula() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let t = Trace::new(&ctx, "sigmoid")?;
    let x = t.input(DType::F32, &[8])?;
    let y = t.sigmoid(x)?;
    t.end(&[y])?;
    let program = ctx.compile(&t)?;
    let mut ys = [0f32; 8];
    program.invoke(&[TensorRef::new(&XS, &[8])?], &mut [TensorMut::new(&mut ys, &[8])?])?;
    for (x, y) in XS.iter().zip(ys) {
        let expected = 1.0 / (1.0 + (-f64::from(*x)).exp());
        assert!((f64::from(y) - expected).abs() <= 1e-6, "sigmoid({x}) = {y}, expected {expected}");
    }
    Ok(())
}

//! Matmul against a double loop (f32 through BLAS, f64, i64), strided views, and a few
//! other ops through the safe API.

use tinymlir::{Bf16, CompileOptions, Context, DType, TensorMut, TensorRef, Trace, F16};

/// Deterministic values in [-1, 1) without a random-number crate.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn reference(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

fn matmul_program(
    ctx: &Context,
    dtype: DType,
    m: i64,
    k: i64,
    n: i64,
    blas: bool,
) -> tinymlir::Result<tinymlir::Program> {
    let t = Trace::new(ctx, "matmul")?;
    let a = t.input(dtype, &[m, k])?;
    let b = t.input(dtype, &[k, n])?;
    let c = t.matmul(a, b)?;
    assert_eq!(t.value_type(c)?.shape, vec![m, n]);
    t.end(&[c])?;
    ctx.compile_with(&t, &CompileOptions { use_blas: blas, ..CompileOptions::default() })
}

#[test]
fn matmul_f32_and_f64_match_a_double_loop() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let (m, k, n) = (7usize, 13usize, 5usize);
    let (a, b) = (values(m * k, 1), values(k * n, 2));
    let expected = reference(&a, &b, m, k, n);
    let shape = |r: usize, c: usize| [r as i64, c as i64];

    for blas in [true, false] {
        let p32 = matmul_program(&ctx, DType::F32, m as i64, k as i64, n as i64, blas)?;
        let (a32, b32): (Vec<f32>, Vec<f32>) =
            (a.iter().map(|&v| v as f32).collect(), b.iter().map(|&v| v as f32).collect());
        let mut c32 = vec![0f32; m * n];
        p32.invoke(
            &[TensorRef::new(&a32, &shape(m, k))?, TensorRef::new(&b32, &shape(k, n))?],
            &mut [TensorMut::new(&mut c32, &shape(m, n))?],
        )?;
        for (got, want) in c32.iter().zip(&expected) {
            assert!((*got as f64 - want).abs() <= 1e-5, "blas={blas}: {got} vs {want}");
        }
    }

    let p64 = matmul_program(&ctx, DType::F64, m as i64, k as i64, n as i64, true)?;
    let mut c64 = vec![0f64; m * n];
    p64.invoke(
        &[TensorRef::new(&a, &shape(m, k))?, TensorRef::new(&b, &shape(k, n))?],
        &mut [TensorMut::new(&mut c64, &shape(m, n))?],
    )?;
    for (got, want) in c64.iter().zip(&expected) {
        assert!((got - want).abs() <= 1e-12, "{got} vs {want}");
    }
    Ok(())
}

#[test]
fn matmul_i64_is_exact() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let p = matmul_program(&ctx, DType::I64, 2, 3, 2, true)?;
    let (a, b) = ([1i64, 2, 3, 4, 5, 6], [7i64, 8, 9, 10, 11, 12]);
    let mut c = [0i64; 4];
    p.invoke(
        &[TensorRef::new(&a, &[2, 3])?, TensorRef::new(&b, &[3, 2])?],
        &mut [TensorMut::new(&mut c, &[2, 2])?],
    )?;
    assert_eq!(c, [58, 64, 139, 154]);
    Ok(())
}

#[test]
fn strided_input_is_a_transposed_view() -> tinymlir::Result<()> {
    // B is stored as (n, k) row-major; a (k, n) view with strides (1, k) is its transpose.
    let ctx = Context::new()?;
    let (m, k, n) = (3usize, 4usize, 2usize);
    let (a, b) = (values(m * k, 3), values(k * n, 4));
    let mut bt = vec![0.0; n * k];
    for p in 0..k {
        for j in 0..n {
            bt[j * k + p] = b[p * n + j];
        }
    }
    let p = matmul_program(&ctx, DType::F64, m as i64, k as i64, n as i64, true)?;
    let mut c = vec![0.0; m * n];
    p.invoke(
        &[
            TensorRef::new(&a, &[m as i64, k as i64])?,
            TensorRef::with_strides(&bt, &[k as i64, n as i64], &[1, k as i64])?,
        ],
        &mut [TensorMut::new(&mut c, &[m as i64, n as i64])?],
    )?;
    for (got, want) in c.iter().zip(reference(&a, &b, m, k, n)) {
        assert!((got - want).abs() <= 1e-12);
    }
    Ok(())
}

#[test]
fn reductions_comparisons_and_constants() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let t = Trace::new(&ctx, "misc")?;
    let x = t.input(DType::F32, &[2, 3])?;
    let offsets = [10f32, 20., 30.];
    let c = t.constant(&TensorRef::new(&offsets, &[3])?)?;
    let sum = t.reduce_sum(t.add(x, c)?, -1, false)?;
    let big = t.greater(x, t.scalar(DType::F32, 2.5)?)?;
    let sliced = t.slice(t.transpose(x, None)?, &[1, 0], &[3, 2])?;
    t.end(&[sum, big, sliced])?;
    let p = ctx.compile(&t)?;

    let xs = [1f32, 2., 3., 4., 5., 6.];
    let (mut sums, mut bigs, mut slice) = ([0f32; 2], [false; 6], [0f32; 4]);
    p.invoke(
        &[TensorRef::new(&xs, &[2, 3])?],
        &mut [
            TensorMut::new(&mut sums, &[2])?,
            TensorMut::new(&mut bigs, &[2, 3])?,
            TensorMut::new(&mut slice, &[2, 2])?,
        ],
    )?;
    assert_eq!(sums, [66., 75.]);
    assert_eq!(bigs, [false, false, true, true, true, true]);
    assert_eq!(slice, [2., 5., 3., 6.]);
    Ok(())
}

#[test]
fn matmul_with_a_half_weight_matches_a_double_loop() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let (m, k, n) = (1usize, 70usize, 33usize);
    let (a, b) = (values(m * k, 5), values(k * n, 6));
    let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
    let shape = |r: usize, c: usize| [r as i64, c as i64];
    let h16: Vec<F16> = b.iter().map(|&v| F16::from_f32(v as f32)).collect();
    let hb16: Vec<Bf16> = b.iter().map(|&v| Bf16::from_f32(v as f32)).collect();
    for dtype in [DType::F16, DType::BF16] {
        let t = Trace::new(&ctx, "half_weight")?;
        let x = t.input(DType::F32, &[m as i64, k as i64])?;
        let w = t.input(dtype, &[k as i64, n as i64])?;
        let y = t.matmul(x, w)?;
        assert_eq!(t.value_type(y)?.dtype, DType::F32);
        t.end(&[y])?;
        let program = ctx.compile(&t)?;
        let widened: Vec<f64> = if dtype == DType::F16 {
            h16.iter().map(|h| f64::from(h.to_f32())).collect()
        } else {
            hb16.iter().map(|h| f64::from(h.to_f32())).collect()
        };
        let a64: Vec<f64> = a32.iter().map(|&v| f64::from(v)).collect();
        let expected = reference(&a64, &widened, m, k, n);
        let mut c = vec![0f32; m * n];
        let weight = if dtype == DType::F16 {
            TensorRef::new(&h16, &shape(k, n))?
        } else {
            TensorRef::new(&hb16, &shape(k, n))?
        };
        program.invoke(
            &[TensorRef::new(&a32, &shape(m, k))?, weight],
            &mut [TensorMut::new(&mut c, &shape(m, n))?],
        )?;
        for (got, want) in c.iter().zip(&expected) {
            assert!((f64::from(*got) - want).abs() <= 1e-5 * want.abs() + 1e-5, "{got} vs {want}");
        }
    }
    // Conversions: exact widening, round to nearest even (1 + 2^-11 is a tie: to 1.0).
    assert_eq!(F16::from_f32(1.0 + 1.0 / 2048.0), F16(0x3c00));
    assert_eq!(F16::from_f32(65520.0), F16(0x7c00));
    assert_eq!(F16(0x0001).to_f32(), 2f32.powi(-24));
    assert_eq!(Bf16::from_f32(1.0 + 1.0 / 256.0), Bf16(0x3f80));
    for v in [0.1f32, -3.75, 1e-6, 6e4] {
        assert_eq!(F16::from_f32(F16::from_f32(v).to_f32()), F16::from_f32(v));
    }
    Ok(())
}

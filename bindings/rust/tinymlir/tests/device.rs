//! DeviceBuffer: bytes in, out, copied and filled; a program run on buffers in place
//! (against a double-precision loop); errors named. On the GPU, in a child process on the
//! software CUDA device (TINYMLIR_CUDA_DRIVER=software): two programs chained through
//! buffers, equal to the loop.

use tinymlir::{Context, DType, DeviceBuffer, ErrorKind, Program, Target, TensorMut, Trace};

/// y = 3 x + 1 over n floats, compiled for `target`.
fn affine(ctx: &Context, target: Target, n: i64) -> tinymlir::Result<Program> {
    let t = Trace::new(ctx, "affine")?;
    let x = t.input(DType::F32, &[n])?;
    let y = t.add(t.mul(x, t.scalar(DType::F32, 3.0)?)?, t.scalar(DType::F32, 1.0)?)?;
    t.end(&[y])?;
    let mut options = tinymlir::CompileOptions::default();
    options.target = target;
    ctx.compile_with(&t, &options)
}

fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i % 97) as f32 * 0.25 - 3.0).collect()
}

fn expected(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| (3.0 * f64::from(v) + 1.0) as f32).collect()
}

#[test]
fn a_buffer_starts_at_zero_and_takes_bytes_in_out_copied_and_filled() -> tinymlir::Result<()> {
    let mut a = DeviceBuffer::new(Target::Cpu, 64)?;
    let mut b = DeviceBuffer::new(Target::Cpu, 64)?;
    assert_eq!((a.len(), a.target()), (64, Target::Cpu));
    let mut words = [1f32; 16];
    a.read(0, &mut words)?;
    assert_eq!(words, [0f32; 16]);
    a.write(8, &[1.5f32, 2.5])?;
    a.fill(16, 0x40, 4)?;
    b.copy_from(32, &a, 8, 16)?;
    b.read(0, &mut words)?;
    let mut want = [0f32; 16];
    want[8] = 1.5;
    want[9] = 2.5;
    want[10] = f32::from_bits(0x4040_4040);
    assert_eq!(words, want);
    Ok(())
}

#[test]
fn a_program_runs_on_buffers_in_place() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let n = 1000;
    let program = affine(&ctx, Target::Cpu, n as i64)?;
    let mut x = DeviceBuffer::new(Target::Cpu, 4 * n)?;
    let mut y = DeviceBuffer::new(Target::Cpu, 4 * n + 8)?;
    let xs = values(n);
    x.write(0, &xs)?;
    program.invoke(&[x.tensor(DType::F32, &[n as i64], 0)?], &mut [y.tensor_mut(DType::F32, &[n as i64], 8)?])?;
    let mut ys = vec![0f32; n];
    y.read(8, &mut ys)?;
    assert_eq!(ys, expected(&xs));
    // A buffer's view mixes with a slice's.
    let mut zs = vec![0f32; n];
    program.invoke(&[y.tensor(DType::F32, &[n as i64], 8)?], &mut [TensorMut::new(&mut zs, &[n as i64])?])?;
    assert_eq!(zs, expected(&ys));
    Ok(())
}

#[test]
fn errors_are_named() -> tinymlir::Result<()> {
    let mut a = DeviceBuffer::new(Target::Cpu, 64)?;
    let e = a.write(60, &[0f32; 2]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfRange);
    assert!(e.message().contains("bytes [60, 60 + 8) of the buffer lie outside it"), "{e}");
    let e = DeviceBuffer::new(Target::Cpu, 0).unwrap_err();
    assert!(e.message().contains("bytes is 0"), "{e}");
    let e = a.tensor(DType::F32, &[17], 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfRange);
    assert!(e.message().contains("needs more than the 64 bytes"), "{e}");
    assert_eq!(a.tensor(DType::F32, &[1], 65).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(a.tensor(DType::Q8_0, &[32], 0).unwrap_err().kind(), ErrorKind::DType);
    let b = DeviceBuffer::new(Target::Cpu, 8)?;
    assert_eq!(a.copy_from(0, &b, 4, 8).unwrap_err().kind(), ErrorKind::OutOfRange);
    Ok(())
}

/// Run by `gpu_programs_chain_through_buffers` with the software device chosen.
#[test]
#[ignore = "run in a child process on the software CUDA device"]
fn gpu_child() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let n = 4096;
    let program = affine(&ctx, Target::Gpu, n as i64)?;
    let mut buffers = [
        DeviceBuffer::new(Target::Gpu, 4 * n)?,
        DeviceBuffer::new(Target::Gpu, 4 * n)?,
        DeviceBuffer::new(Target::Gpu, 4 * n)?,
    ];
    let xs: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    buffers[0].write(0, &xs)?;
    let [x, y, z] = &mut buffers;
    let shape = [n as i64];
    program.invoke(&[x.tensor(DType::F32, &shape, 0)?], &mut [y.tensor_mut(DType::F32, &shape, 0)?])?;
    program.invoke(&[y.tensor(DType::F32, &shape, 0)?], &mut [z.tensor_mut(DType::F32, &shape, 0)?])?;
    let mut got = vec![0f32; n];
    z.read(0, &mut got)?;
    assert_eq!(got, expected(&expected(&xs)));
    let e = z.read(4 * n, &mut [0f32; 1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfRange);
    Ok(())
}

#[test]
fn gpu_programs_chain_through_buffers() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "gpu_child", "--nocapture"])
        .env("TINYMLIR_CUDA_DRIVER", "software")
        .env("TINYMLIR_SOFTWARE_GPU_MEMORY", "256M")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}{}", String::from_utf8_lossy(&out.stderr));
}

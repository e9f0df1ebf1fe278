//! Errors carry the status and the library's message; the safe API checks what the C side
//! would otherwise read out of bounds.

use tinymlir::{Context, DType, ErrorKind, Model, TensorMut, TensorRef, Trace};

#[test]
fn shape_error_names_the_op_and_shapes() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let t = Trace::new(&ctx, "errors")?;
    let a = t.input(DType::F32, &[2, 3])?;
    let b = t.input(DType::F32, &[4, 3])?;
    let err = t.add(a, b).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Shape);
    for word in ["tm_op(add)", "(2,3)", "(4,3)"] {
        assert!(err.message().contains(word), "{:?} lacks {word}", err.message());
    }
    assert_eq!(err.status(), 2); // TM_ERROR_SHAPE
    assert!(err.to_string().starts_with("TM_ERROR_SHAPE: "), "{err}");

    let err = t.matmul(a, b).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Shape);
    assert!(err.message().contains("tm_op(matmul)"), "{}", err.message());

    // The failed ops recorded nothing: the trace is still usable.
    let c = t.add(a, a)?;
    t.end(&[c])?;
    assert_eq!(ctx.compile(&t)?.num_inputs(), 2);
    Ok(())
}

#[test]
fn statuses_map_to_kinds() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let t = Trace::new(&ctx, "kinds")?;
    let x = t.input(DType::F32, &[2, 3])?;
    let b = t.input(DType::Bool, &[3])?;
    assert_eq!(t.reduce_sum(x, 2, false).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(t.exp(b).unwrap_err().kind(), ErrorKind::DType);
    assert_eq!(t.input(DType::F32, &[1; 9]).unwrap_err().kind(), ErrorKind::Shape);
    assert_eq!(t.add(x, tinymlir::Value(999)).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // Not ended: cannot compile.
    assert_eq!(ctx.compile(&t).unwrap_err().kind(), ErrorKind::InvalidArgument);
    t.end(&[x])?;
    assert_eq!(t.neg(x).unwrap_err().kind(), ErrorKind::InvalidArgument); // after end
    let err = Model::load(&ctx, "/nonexistent/model").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io);
    assert!(!err.message().is_empty());
    Ok(())
}

#[test]
fn per_axis_counts_go_to_the_library() -> tinymlir::Result<()> {
    // slice and transpose pass their lists' counts to tm_op, which checks them against the
    // rank.
    let ctx = Context::new()?;
    let t = Trace::new(&ctx, "axes")?;
    let x = t.input(DType::F32, &[2, 3])?;
    let err = t.slice(x, &[0], &[1]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("tm_op(slice)"), "{}", err.message());
    let err = t.transpose(x, Some(&[0])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("tm_op(transpose)"), "{}", err.message());
    assert_eq!(t.transpose(x, Some(&[0, 0])).unwrap_err().kind(), ErrorKind::OutOfRange);
    // Lists of different lengths never reach the library.
    let err = t.slice(x, &[0, 0], &[1]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let y = t.slice(t.transpose(x, None)?, &[1, 0], &[3, 2])?;
    assert_eq!(t.value_type(y)?.shape, vec![2, 2]);
    Ok(())
}

#[test]
fn views_and_invoke_are_checked() -> tinymlir::Result<()> {
    let data = [0f32; 6];
    // A slice shorter or longer than its shape, negative dims, strides past the end.
    assert_eq!(TensorRef::new(&data, &[2, 4]).unwrap_err().kind(), ErrorKind::Shape);
    assert_eq!(TensorRef::new(&data, &[5]).unwrap_err().kind(), ErrorKind::Shape);
    assert_eq!(TensorRef::new(&data, &[-1, -6]).unwrap_err().kind(), ErrorKind::Shape);
    assert_eq!(TensorRef::with_strides(&data, &[2, 3], &[4, 1]).unwrap_err().kind(), ErrorKind::Shape);
    assert!(TensorRef::with_strides(&data, &[3, 2], &[1, 3]).is_ok());

    let ctx = Context::new()?;
    let t = Trace::new(&ctx, "invoke")?;
    let x = t.input(DType::F32, &[2, 3])?;
    t.end(&[t.neg(x)?])?;
    let p = ctx.compile(&t)?;
    let mut out = [0f32; 6];
    let mut out64 = [0f64; 6];
    // Wrong shape, wrong dtype, wrong count: all rejected before native code runs.
    let err =
        p.invoke(&[TensorRef::new(&data, &[3, 2])?], &mut [TensorMut::new(&mut out, &[2, 3])?]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Shape);
    let err = p
        .invoke(&[TensorRef::new(&data, &[2, 3])?], &mut [TensorMut::new(&mut out64, &[2, 3])?])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DType);
    let err = p.invoke(&[], &mut [TensorMut::new(&mut out, &[2, 3])?]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    Ok(())
}

#[test]
fn messages_are_per_thread() -> tinymlir::Result<()> {
    // tm_last_error is thread-local and copied at once: each thread sees its own failure.
    let ctx = Context::new()?;
    std::thread::scope(|s| {
        for rows in 2..6i64 {
            let ctx = &ctx;
            s.spawn(move || {
                let t = Trace::new(ctx, "threads").unwrap();
                let a = t.input(DType::F32, &[rows, 3]).unwrap();
                let b = t.input(DType::F32, &[7, 3]).unwrap();
                for _ in 0..50 {
                    let err = t.add(a, b).unwrap_err();
                    assert!(err.message().contains(&format!("({rows},3)")), "{}", err.message());
                }
            });
        }
    });
    Ok(())
}

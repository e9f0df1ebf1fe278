//! Tracing: a program is recorded op by op; shapes and dtypes are checked at each call.

use std::ffi::CString;
use std::ptr;

use tinymlir_sys as sys;

use crate::context::Context;
use crate::error::{check, Error, ErrorKind, Result};
use crate::tensor::{DType, TensorRef, TensorType, MAX_RANK};

/// A value inside a trace (an index into its values). Only meaningful for the trace that
/// made it; the library rejects indices it does not know.
/// `repr(transparent)` so a `&[Value]` can be handed to C as a `tm_value` array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Value(pub sys::tm_value);

/// A program being traced. Methods take `&self` so that ops nest
/// (`t.mul(t.add(x, y)?, z)?`); the type is `Send` but not `Sync`, since the C API allows one
/// thread at a time on a trace. It does not borrow the context: an ended trace can be
/// compiled in any context, any number of times.
#[derive(Debug)]
pub struct Trace {
    raw: *mut sys::tm_trace,
}

// SAFETY: tinymlir.h: "A tm_trace must be used by one thread at a time" (not Sync); it does
// not keep the context, and nothing in it is tied to the creating thread.
unsafe impl Send for Trace {}

fn int32(n: usize, what: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| Error::new(ErrorKind::InvalidArgument, format!("too many {what}: {n}")))
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $name:ident => $c:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, a: Value, b: Value) -> Result<Value> {
            self.record(|out| unsafe { sys::$c(self.raw, a.0, b.0, out) })
        }
    )*};
}

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $name:ident => $c:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, x: Value) -> Result<Value> {
            self.record(|out| unsafe { sys::$c(self.raw, x.0, out) })
        }
    )*};
}

macro_rules! reduce_ops {
    ($($(#[$doc:meta])* $name:ident => $c:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, x: Value, axis: i32, keepdims: bool) -> Result<Value> {
            self.record(|out| unsafe { sys::$c(self.raw, x.0, axis, keepdims as i32, out) })
        }
    )*};
}

impl Trace {
    /// Begins a trace; `name` appears in error messages.
    pub fn new(ctx: &Context, name: &str) -> Result<Trace> {
        let name = CString::new(name)
            .map_err(|_| Error::new(ErrorKind::InvalidArgument, "trace name contains a NUL byte"))?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::tm_trace_begin(ctx.as_raw(), name.as_ptr(), &mut raw) })?;
        Ok(Trace { raw })
    }

    pub(crate) fn as_raw(&self) -> *const sys::tm_trace {
        self.raw
    }

    /// Runs one tm_op_* call and returns the value it wrote.
    fn record(&self, op: impl FnOnce(*mut sys::tm_value) -> sys::tm_status) -> Result<Value> {
        let mut out = 0;
        check(op(&mut out))?;
        Ok(Value(out))
    }

    /// Fixes the outputs, in order. Afterwards no op may be added, and the trace can be
    /// compiled.
    pub fn end(&self, outputs: &[Value]) -> Result<()> {
        let n = int32(outputs.len(), "outputs")?;
        check(unsafe { sys::tm_trace_end(self.raw, outputs.as_ptr().cast(), n) })
    }

    /// The dtype and shape of a value.
    pub fn value_type(&self, value: Value) -> Result<TensorType> {
        let (mut dtype, mut rank, mut shape) = (0, 0, [0i64; MAX_RANK]);
        check(unsafe { sys::tm_value_type(self.raw, value.0, &mut dtype, &mut rank, shape.as_mut_ptr()) })?;
        Ok(TensorType { dtype: DType::from_raw(dtype)?, shape: shape[..rank as usize].to_vec() })
    }

    /// Declares the next program input (numbered in declaration order). Weights are
    /// inputs too.
    pub fn input(&self, dtype: DType, shape: &[i64]) -> Result<Value> {
        let rank = int32(shape.len(), "dims")?;
        self.record(|out| unsafe { sys::tm_op_input(self.raw, dtype.raw(), rank, shape.as_ptr(), out) })
    }

    /// A rank-0 constant that promotes like a Python scalar (f32 tensor + f32 scalar 0.5
    /// stays f32).
    pub fn scalar(&self, dtype: DType, value: f64) -> Result<Value> {
        self.record(|out| unsafe { sys::tm_op_scalar(self.raw, dtype.raw(), value, out) })
    }

    /// A constant tensor: the data is copied into the program (and its cache key).
    pub fn constant(&self, data: &TensorRef<'_>) -> Result<Value> {
        let raw = data.raw();
        self.record(|out| unsafe { sys::tm_op_constant(self.raw, &raw, out) })
    }

    binary_ops! {
        /// Elementwise `a + b`, with NumPy broadcasting and promotion.
        add => tm_op_add;
        /// Elementwise `a - b`.
        sub => tm_op_sub;
        /// Elementwise `a * b`.
        mul => tm_op_mul;
        /// Elementwise `a / b` (integers divide to f64, as NumPy's true division).
        div => tm_op_div;
        /// Elementwise `a ** b`.
        pow => tm_op_pow;
        /// Elementwise maximum (propagates NaN).
        maximum => tm_op_maximum;
        /// Elementwise minimum (propagates NaN).
        minimum => tm_op_minimum;
        /// `a < b` as bool.
        less => tm_op_less;
        /// `a > b` as bool.
        greater => tm_op_greater;
        /// `a == b` as bool.
        equal => tm_op_equal;
        /// Matrix product, batched over equal leading dims; `(.., m, k) @ (k, n)` folds the
        /// leading dims into m.
        matmul => tm_op_matmul;
        /// Rows of `table` selected by `indices` (i32 or i64).
        gather => tm_op_gather;
    }

    unary_ops! {
        /// GELU, tanh approximation (GPT-2's gelu_new).
        gelu_tanh => tm_op_gelu_tanh;
    }

    /// Any unary op of the library's table by kind (`tm_op_unary`); each also has a method
    /// named after it (`exp`, `sigmoid`, ...), generated by build.rs from the header.
    pub fn unary(&self, op: sys::tm_unary_op, x: Value) -> Result<Value> {
        self.record(|out| unsafe { sys::tm_op_unary(self.raw, op, x.0, out) })
    }

    reduce_ops! {
        /// Sum over `axis` (negative counts from the end).
        reduce_sum => tm_op_reduce_sum;
        /// Maximum over `axis`.
        reduce_max => tm_op_reduce_max;
        /// Mean over `axis` (computed in float).
        reduce_mean => tm_op_reduce_mean;
        /// Population variance over `axis` (computed in float).
        reduce_var => tm_op_reduce_var;
    }

    /// `cond ? a : b`, all three broadcast together (C: `tm_op_where`; `where` is a Rust
    /// keyword).
    #[doc(alias = "where")]
    pub fn where_(&self, cond: Value, a: Value, b: Value) -> Result<Value> {
        self.record(|out| unsafe { sys::tm_op_where(self.raw, cond.0, a.0, b.0, out) })
    }

    /// Reshape; one entry of `shape` may be -1 (inferred).
    pub fn reshape(&self, x: Value, shape: &[i64]) -> Result<Value> {
        let rank = int32(shape.len(), "dims")?;
        self.record(|out| unsafe { sys::tm_op_reshape(self.raw, x.0, rank, shape.as_ptr(), out) })
    }

    /// Transpose by `perm`, a permutation with one entry per axis (the library checks the
    /// count against the rank); `None` reverses the axes.
    pub fn transpose(&self, x: Value, perm: Option<&[i32]>) -> Result<Value> {
        let (perm, n) = match perm {
            Some(perm) => (perm.as_ptr(), int32(perm.len(), "axes")?),
            None => (ptr::null(), 0),
        };
        self.record(|out| unsafe { sys::tm_op_transpose(self.raw, x.0, perm, n, out) })
    }

    /// `x[begin:end]` with unit steps, one entry per axis (the library checks the count
    /// against the rank). The C call takes one count for both arrays, so they must be
    /// equally long.
    pub fn slice(&self, x: Value, begin: &[i64], end: &[i64]) -> Result<Value> {
        if begin.len() != end.len() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("slice: begin has {} entries, end has {}", begin.len(), end.len()),
            ));
        }
        let rank = int32(begin.len(), "axes")?;
        self.record(|out| unsafe { sys::tm_op_slice(self.raw, x.0, rank, begin.as_ptr(), end.as_ptr(), out) })
    }

    /// Concatenates `xs` (at least one) along `axis`.
    pub fn concat(&self, xs: &[Value], axis: i32) -> Result<Value> {
        let n = int32(xs.len(), "values")?;
        self.record(|out| unsafe { sys::tm_op_concat(self.raw, xs.as_ptr().cast(), n, axis, out) })
    }

    /// Converts `x` to `dtype` (floats to ints truncate toward zero).
    pub fn cast(&self, x: Value, dtype: DType) -> Result<Value> {
        self.record(|out| unsafe { sys::tm_op_cast(self.raw, x.0, dtype.raw(), out) })
    }

    /// Numerically stable softmax along `axis`.
    pub fn softmax(&self, x: Value, axis: i32) -> Result<Value> {
        self.record(|out| unsafe { sys::tm_op_softmax(self.raw, x.0, axis, out) })
    }

    /// Layer normalisation over the last axis: `(x - mean) / sqrt(var + eps) * gamma + beta`.
    pub fn layer_norm(&self, x: Value, gamma: Value, beta: Value, eps: f64) -> Result<Value> {
        self.record(|out| unsafe { sys::tm_op_layer_norm(self.raw, x.0, gamma.0, beta.0, eps, out) })
    }

    /// A `(rows, cols)` additive mask: 0 where `col <= row + offset`, the dtype's lowest
    /// finite value elsewhere.
    pub fn causal_mask(&self, rows: i64, cols: i64, offset: i64, dtype: DType) -> Result<Value> {
        self.record(|out| unsafe { sys::tm_op_causal_mask(self.raw, rows, cols, offset, dtype.raw(), out) })
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        // Programs compiled from the trace are independent of it.
        unsafe { sys::tm_trace_destroy(self.raw) }
    }
}

// One method per unary op of the header's tm_unary_op (build.rs).
include!(concat!(env!("OUT_DIR"), "/unary_ops.rs"));

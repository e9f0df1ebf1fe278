package tinymlir

/*
#include <stdlib.h>
#include <tinymlir/tinymlir.h>

// Go cannot call a C function pointer; these call one, so that each op below is one line
// naming its C function.
typedef tm_status (*tmg_binary_fn)(tm_trace *, tm_value, tm_value, tm_value *);
typedef tm_status (*tmg_unary_fn)(tm_trace *, tm_value, tm_value *);
typedef tm_status (*tmg_reduce_fn)(tm_trace *, tm_value, int32_t, int32_t, tm_value *);
static tm_status tmg_binary(tmg_binary_fn f, tm_trace *t, tm_value a, tm_value b, tm_value *out) {
  return f(t, a, b, out);
}
static tm_status tmg_unary(tmg_unary_fn f, tm_trace *t, tm_value x, tm_value *out) {
  return f(t, x, out);
}
static tm_status tmg_reduce(tmg_reduce_fn f, tm_trace *t, tm_value x, int32_t axis, int32_t keepdims,
                            tm_value *out) {
  return f(t, x, axis, keepdims, out);
}
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Value is a value inside a trace (an index into its values); only meaningful for the
// trace that made it.
type Value uint32

// Trace records a program op by op; shapes and dtypes are checked at each call, so a bad
// program fails at the op, with a message naming it. A trace serves one call at a time (the
// C API's rule); a concurrent call fails instead of waiting. It is independent of the
// context it was begun in: an ended trace can be compiled in any context.
type Trace struct {
	mu sync.Mutex
	c  *C.tm_trace
}

// NewTrace begins a trace; name appears in error messages.
func NewTrace(ctx *Context, name string) (*Trace, error) {
	cname, err := cString("the trace name", name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	t := &Trace{}
	err = ctx.use(func(c *C.tm_context) error {
		return call(func() C.tm_status { return C.tm_trace_begin(c, cname, &t.c) })
	})
	if err != nil {
		return nil, err
	}
	runtime.SetFinalizer(t, (*Trace).Close)
	return t, nil
}

// Close destroys the trace; programs compiled from it stay valid. Closing twice is fine.
func (t *Trace) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	runtime.SetFinalizer(t, nil)
	C.tm_trace_destroy(t.c) // accepts NULL
	t.c = nil
	return nil
}

// use runs f with the C trace, alone.
func (t *Trace) use(f func(*C.tm_trace) error) error {
	if t == nil {
		return newError(StatusInvalidArgument, "the trace is nil")
	}
	if !t.mu.TryLock() {
		return newError(StatusInvalidArgument, "the trace is in use by another goroutine")
	}
	defer t.mu.Unlock()
	if t.c == nil {
		return newError(StatusInvalidArgument, "the trace is closed")
	}
	return f(t.c)
}

// record runs one tm_op_* call and returns the value it wrote.
func (t *Trace) record(op func(*C.tm_trace, *C.tm_value) C.tm_status) (Value, error) {
	var out C.tm_value
	err := t.use(func(c *C.tm_trace) error {
		return call(func() C.tm_status { return op(c, &out) })
	})
	return Value(out), err
}

// Slices of int64, int32 and Value go to C as pointers to their first element: Go memory
// without Go pointers, read only during the call, as the cgo rules allow.
func int64s(s []int64) *C.int64_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&s[0]))
}

func values(s []Value) *C.tm_value {
	if len(s) == 0 {
		return nil
	}
	return (*C.tm_value)(unsafe.Pointer(&s[0]))
}

// End fixes the outputs, in order; afterwards the trace can be compiled, and no op added.
func (t *Trace) End(outputs ...Value) error {
	return t.use(func(c *C.tm_trace) error {
		return call(func() C.tm_status { return C.tm_trace_end(c, values(outputs), C.int32_t(len(outputs))) })
	})
}

// ValueType returns the dtype and shape of a value.
func (t *Trace) ValueType(v Value) (TensorType, error) {
	var dtype C.tm_dtype
	var rank C.int32_t
	var shape [MaxRank]C.int64_t
	err := t.use(func(c *C.tm_trace) error {
		return call(func() C.tm_status { return C.tm_value_type(c, C.tm_value(v), &dtype, &rank, &shape[0]) })
	})
	if err != nil {
		return TensorType{}, err
	}
	return tensorType(dtype, rank, shape[:]), nil
}

func tensorType(dtype C.tm_dtype, rank C.int32_t, shape []C.int64_t) TensorType {
	tt := TensorType{DType: DType(dtype), Shape: make([]int64, rank)}
	for i := range tt.Shape {
		tt.Shape[i] = int64(shape[i])
	}
	return tt
}

// Input declares the next program input (numbered in declaration order). Weights are
// inputs too.
func (t *Trace) Input(dtype DType, shape ...int64) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_input(c, C.tm_dtype(dtype), C.int32_t(len(shape)), int64s(shape), out)
	})
}

// Scalar is a rank-0 constant that promotes like a Python scalar (f32 + 0.5 stays f32).
func (t *Trace) Scalar(dtype DType, value float64) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_scalar(c, C.tm_dtype(dtype), C.double(value), out)
	})
}

// Constant records a constant tensor; its data is copied into the program.
func (t *Trace) Constant(data Tensor) (Value, error) {
	var out C.tm_value
	err := withCTensors([]Tensor{data}, nil, func(view, _ *C.tm_tensor) error {
		return t.use(func(c *C.tm_trace) error {
			return call(func() C.tm_status { return C.tm_op_constant(c, view, &out) })
		})
	})
	return Value(out), err
}

func (t *Trace) binary(op C.tmg_binary_fn, a, b Value) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tmg_binary(op, c, C.tm_value(a), C.tm_value(b), out)
	})
}

// Add is a + b, elementwise, with NumPy broadcasting and promotion.
func (t *Trace) Add(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_add), a, b)
}

// Sub is a - b.
func (t *Trace) Sub(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_sub), a, b)
}

// Mul is a * b.
func (t *Trace) Mul(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_mul), a, b)
}

// Div is a / b (integers divide to f64, as NumPy's true division).
func (t *Trace) Div(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_div), a, b)
}

// Pow is a ** b.
func (t *Trace) Pow(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_pow), a, b)
}

// Maximum is the elementwise maximum (propagates NaN).
func (t *Trace) Maximum(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_maximum), a, b)
}

// Minimum is the elementwise minimum (propagates NaN).
func (t *Trace) Minimum(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_minimum), a, b)
}

// Less is a < b, as bool.
func (t *Trace) Less(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_less), a, b)
}

// Greater is a > b, as bool.
func (t *Trace) Greater(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_greater), a, b)
}

// Equal is a == b, as bool.
func (t *Trace) Equal(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_equal), a, b)
}

// Matmul is the matrix product, batched over equal leading dims; (.., m, k) @ (k, n) folds
// the leading dims into m.
func (t *Trace) Matmul(a, b Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_matmul), a, b)
}

// Gather selects rows of table by indices (i32 or i64).
func (t *Trace) Gather(table, indices Value) (Value, error) {
	return t.binary(C.tmg_binary_fn(C.tm_op_gather), table, indices)
}

// Where is cond ? a : b, all three broadcast together.
func (t *Trace) Where(cond, a, b Value) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_where(c, C.tm_value(cond), C.tm_value(a), C.tm_value(b), out)
	})
}

// UnaryOp is one of the library's unary ops (tm_unary_op); unary_ops.go names them and
// gives each a method (Exp, Sigmoid, ...).
type UnaryOp int32

//go:generate go run ./cmd/genops

// UnaryOpCount is how many unary ops the loaded library knows (tm_unary_op_count): their
// values are 0 .. count - 1.
func UnaryOpCount() int { return int(C.tm_unary_op_count()) }

// UnaryOpName is the library's name for op ("exp"), or "" for one it does not know.
func UnaryOpName(op UnaryOp) string {
	name := C.tm_unary_op_name(C.tm_unary_op(op))
	if name == nil {
		return ""
	}
	return C.GoString(name)
}

// Unary records op(x) (tm_op_unary).
func (t *Trace) Unary(op UnaryOp, x Value) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_unary(c, C.tm_unary_op(op), C.tm_value(x), out)
	})
}

func (t *Trace) unary(op C.tmg_unary_fn, x Value) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tmg_unary(op, c, C.tm_value(x), out)
	})
}

// GeluTanh is GELU, tanh approximation (GPT-2's gelu_new).
func (t *Trace) GeluTanh(x Value) (Value, error) {
	return t.unary(C.tmg_unary_fn(C.tm_op_gelu_tanh), x)
}

func (t *Trace) reduce(op C.tmg_reduce_fn, x Value, axis int, keepdims bool) (Value, error) {
	a, err := int32Arg("the axis", axis)
	if err != nil {
		return 0, err
	}
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tmg_reduce(op, c, C.tm_value(x), a, cbool(keepdims), out)
	})
}

// ReduceSum sums over axis (negative counts from the end).
func (t *Trace) ReduceSum(x Value, axis int, keepdims bool) (Value, error) {
	return t.reduce(C.tmg_reduce_fn(C.tm_op_reduce_sum), x, axis, keepdims)
}

// ReduceMax is the maximum over axis.
func (t *Trace) ReduceMax(x Value, axis int, keepdims bool) (Value, error) {
	return t.reduce(C.tmg_reduce_fn(C.tm_op_reduce_max), x, axis, keepdims)
}

// ReduceMean is the mean over axis (computed in float).
func (t *Trace) ReduceMean(x Value, axis int, keepdims bool) (Value, error) {
	return t.reduce(C.tmg_reduce_fn(C.tm_op_reduce_mean), x, axis, keepdims)
}

// ReduceVar is the population variance over axis (computed in float).
func (t *Trace) ReduceVar(x Value, axis int, keepdims bool) (Value, error) {
	return t.reduce(C.tmg_reduce_fn(C.tm_op_reduce_var), x, axis, keepdims)
}

// Reshape reshapes x; one entry of shape may be -1 (inferred).
func (t *Trace) Reshape(x Value, shape ...int64) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_reshape(c, C.tm_value(x), C.int32_t(len(shape)), int64s(shape), out)
	})
}

// Transpose permutes the axes of x by perm, one entry per axis (the library checks the
// count against the rank); no perm reverses them.
func (t *Trace) Transpose(x Value, perm ...int32) (Value, error) {
	var p *C.int32_t
	if len(perm) > 0 {
		p = (*C.int32_t)(unsafe.Pointer(&perm[0]))
	}
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_transpose(c, C.tm_value(x), p, C.int32_t(len(perm)), out)
	})
}

// Slice is x[begin:end] with unit steps, one entry per axis (the library checks the count
// against the rank). The C call takes one count for both slices, so they must be equally
// long.
func (t *Trace) Slice(x Value, begin, end []int64) (Value, error) {
	if len(begin) != len(end) {
		return 0, newError(StatusInvalidArgument, "Slice: begin has %d entries, end has %d", len(begin), len(end))
	}
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_slice(c, C.tm_value(x), C.int32_t(len(begin)), int64s(begin), int64s(end), out)
	})
}

// Concat concatenates xs (at least one) along axis.
func (t *Trace) Concat(xs []Value, axis int) (Value, error) {
	a, err := int32Arg("the axis", axis)
	if err != nil {
		return 0, err
	}
	n, err := int32Arg("the number of values", len(xs))
	if err != nil {
		return 0, err
	}
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_concat(c, values(xs), n, a, out)
	})
}

// Cast converts x to dtype (floats to ints truncate toward zero).
func (t *Trace) Cast(x Value, dtype DType) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_cast(c, C.tm_value(x), C.tm_dtype(dtype), out)
	})
}

// Softmax is the numerically stable softmax along axis.
func (t *Trace) Softmax(x Value, axis int) (Value, error) {
	a, err := int32Arg("the axis", axis)
	if err != nil {
		return 0, err
	}
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_softmax(c, C.tm_value(x), a, out)
	})
}

// LayerNorm normalises over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.
func (t *Trace) LayerNorm(x, gamma, beta Value, eps float64) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_layer_norm(c, C.tm_value(x), C.tm_value(gamma), C.tm_value(beta), C.double(eps), out)
	})
}

// CausalMask is a (rows, cols) additive mask: 0 where col <= row + offset, the dtype's
// lowest finite value elsewhere.
func (t *Trace) CausalMask(rows, cols, offset int64, dtype DType) (Value, error) {
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op_causal_mask(c, C.int64_t(rows), C.int64_t(cols), C.int64_t(offset), C.tm_dtype(dtype), out)
	})
}

package tinymlir

/*
#include <stdlib.h>
#include <tinymlir/tinymlir.h>
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

// OpKind is one of the library's table ops (tm_op_kind); table_ops.go names them and gives
// each a method (Add, ReduceSum, Slice, ...), made from its signature.
type OpKind int32

// OpCount is how many table ops the loaded library knows (tm_op_count): their kinds are
// 0 .. count - 1.
func OpCount() int { return int(C.tm_op_count()) }

// OpSignature is the library's signature of op ("reduce_sum(x, axis: int, keepdims: bool =
// 0)"), or "" for one it does not know.
func OpSignature(op OpKind) string {
	signature := C.tm_op_signature(C.tm_op_kind(op))
	if signature == nil {
		return ""
	}
	return C.GoString(signature)
}

// Op records any table op by kind (tm_op): its values, its int, bool and dtype attributes
// then its lists, and its real attribute (the library checks the counts against the op's
// signature).
func (t *Trace) Op(op OpKind, operands []Value, ints []int64, real float64) (Value, error) {
	n, err := int32Arg("the number of values", len(operands))
	if err != nil {
		return 0, err
	}
	m, err := int32Arg("the number of integers", len(ints))
	if err != nil {
		return 0, err
	}
	return t.record(func(c *C.tm_trace, out *C.tm_value) C.tm_status {
		return C.tm_op(c, C.tm_op_kind(op), values(operands), n, int64s(ints), m, C.double(real), out)
	})
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
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

// Package tinymlir drives tinymlir, a small tensor compiler on MLIR/LLVM, through its C API
// (libtinymlir, found with pkg-config).
//
// A program is traced op by op (NewTrace, Trace.Input, Trace.Add, ...), compiled
// (Context.Compile: fused, bufferized, JIT-compiled) and invoked on Go slices
// (Program.Invoke). LoadModel runs GPT-2 checkpoints.
//
// Every object has an idempotent Close; a finalizer closes what was forgotten, but Close
// frees the native memory (compiled code, weights) as soon as you are done. Failures are
// *Error values with the C status and the library's message. Context, Program and Model may
// be used from several goroutines at once (a model runs one computation at a time: the
// library answers an overlapping one with StatusBusy); a Trace serves one call at a time (a
// concurrent call fails with an error instead of corrupting it).
package tinymlir

/*
#cgo pkg-config: tinymlir
#include <stdlib.h>
#include <tinymlir/gpt2.h>
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"strings"
)

// Status is the C API's tm_status.
type Status int

// The statuses (tm_status; append-only in the C API).
const (
	StatusOK              Status = C.TM_OK
	StatusInvalidArgument Status = C.TM_ERROR_INVALID_ARGUMENT
	StatusShape           Status = C.TM_ERROR_SHAPE
	StatusDType           Status = C.TM_ERROR_DTYPE
	StatusOutOfRange      Status = C.TM_ERROR_OUT_OF_RANGE
	StatusCompile         Status = C.TM_ERROR_COMPILE
	StatusRuntime         Status = C.TM_ERROR_RUNTIME
	StatusUnsupported     Status = C.TM_ERROR_UNSUPPORTED
	StatusIO              Status = C.TM_ERROR_IO
	StatusOutOfMemory     Status = C.TM_ERROR_OUT_OF_MEMORY
	// StatusBusy: the object is in use by another call (a model's Logits, Generate or
	// Stats while another of them runs on it, from another goroutine or from a Generate
	// callback); nothing was changed.
	StatusBusy Status = C.TM_ERROR_BUSY
)

// String is the C name of the status ("TM_ERROR_SHAPE").
func (s Status) String() string {
	return C.GoString(C.tm_status_string(C.tm_status(s)))
}

// Error is a failed call: the status and the library's message (which names the op, the
// shapes or the file involved). Errors raised by this package itself (a closed object, a
// slice shorter than its shape) use the status the library would have used.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	return e.Status.String() + ": " + e.Message
}

func newError(status Status, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// cString is s as a C string for the parameter `what`, to be freed with C.free. A Go string
// may hold a NUL byte, where C.CString would silently cut it (a path "victim\x00.tmp" would
// name the file "victim"): such a string is an error naming the parameter.
func cString(what, s string) (*C.char, error) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return nil, newError(StatusInvalidArgument, "%s %q holds a NUL byte at %d", what, s, i)
	}
	return C.CString(s), nil
}

// checkABI fails with StatusUnsupported when the loaded library's ABI is not the header's:
// another major version, or fewer additions (TM_API_VERSION is 1000 * major + minor):
// checked by the two calls every use starts with, NewContext and LoadProgram (a process
// that only runs exported programs makes no context).
func checkABI() error {
	if APIVersion()/1000 != HeaderAPIVersion/1000 || APIVersion() < HeaderAPIVersion {
		return newError(StatusUnsupported, "libtinymlir has ABI version %d, this package was built for %d",
			APIVersion(), HeaderAPIVersion)
	}
	return nil
}

// int32Arg is v for an int32_t parameter of the C API, `what` naming it: C.int32_t(v) would
// keep the low 32 bits (an axis of 1<<32 became axis 0, a MaxNewTokens of 1<<32+3 three
// tokens), so a value beyond int32 is an error instead.
func int32Arg(what string, v int) (C.int32_t, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, newError(StatusOutOfRange, "%s is %d, outside the int32 range the library takes", what, v)
	}
	return C.int32_t(v), nil
}

// call runs one C call and turns a failed status into an *Error. tm_last_error is per OS
// thread and a goroutine may change threads between two cgo calls, so the goroutine is
// pinned to its thread from the call until the message has been copied.
func call(f func() C.tm_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if status := f(); status != C.TM_OK {
		return &Error{Status: Status(status), Message: C.GoString(C.tm_last_error())}
	}
	return nil
}

// Version is the loaded library's version, e.g. "1.0.0" (tm_version, read at run time).
func Version() string { return C.GoString(C.tm_version()) }

// APIVersion is the loaded library's ABI version; NewContext refuses a library whose ABI
// differs from the header this package was compiled with.
func APIVersion() uint32 { return uint32(C.tm_api_version()) }

// HeaderAPIVersion is TM_API_VERSION of the header this package was compiled with.
const HeaderAPIVersion = uint32(C.TM_API_VERSION)

// HeaderVersion is TM_VERSION_STRING of the header this package was compiled with (the
// project's one version, like Version for the library).
const HeaderVersion = C.TM_VERSION_STRING

// MaxRank is the largest tensor rank the API accepts.
const MaxRank = int(C.TM_MAX_RANK)

// DType is an element type.
type DType int

// The element types (tm_dtype).
const (
	F32  DType = C.TM_F32
	F64  DType = C.TM_F64
	I32  DType = C.TM_I32
	I64  DType = C.TM_I64
	Bool DType = C.TM_BOOL // one byte per element, 0 or 1 (Go's bool)
	// Half precision, storage types (inputs, outputs, data movement, casts, and matmuls with
	// an F32 operand; arithmetic on them is refused): Float16 and BFloat16 hold their bits.
	F16  DType = C.TM_F16
	BF16 DType = C.TM_BF16
	// Q8_0 is 8-bit weights in blocks of 32 along the last axis (llama.cpp's Q8_0: a
	// binary16 scale and 32 int8 per 34-byte block), for ModelOptions.Weights. Size is 0.
	Q8_0 DType = C.TM_Q8_0
)

// Float16 is an IEEE binary16 value, as its bits (Go has no float16).
type Float16 uint16

// BFloat16 is a bfloat16 value, as its bits: the top half of a float32.
type BFloat16 uint16

// Float32 is h's exact value.
func (h Float16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	magnitude := uint32(h & 0x7fff)
	if magnitude >= 0x7c00 {
		return math.Float32frombits(sign | 0x7f800000 | (magnitude&0x3ff)<<13)
	}
	// Moved into place and scaled by 2^112: re-biases normals, normalises subnormals.
	v := math.Float32frombits(magnitude<<13) * math.Float32frombits(0x77800000)
	return math.Float32frombits(sign | math.Float32bits(v))
}

// Float16From rounds x to the nearest binary16, ties to even (as the library's casts).
func Float16From(x float32) Float16 {
	bits := math.Float32bits(x)
	sign := Float16((bits >> 16) & 0x8000)
	magnitude := bits & 0x7fffffff
	round := func(q, rem, half uint32) uint32 {
		if rem > half || (rem == half && q&1 == 1) {
			return q + 1
		}
		return q
	}
	switch {
	case magnitude > 0x7f800000:
		return sign | 0x7e00 | Float16((magnitude>>13)&0x3ff)
	case magnitude >= 0x477ff000: // from 65520 up: infinity
		return sign | 0x7c00
	case magnitude < 0x38800000: // below 2^-14: a subnormal, in steps of 2^-24
		e := magnitude >> 23
		if e < 102 {
			return sign
		}
		m := magnitude&0x7fffff | 0x800000
		shift := 126 - e
		return sign | Float16(round(m>>shift, m&(1<<shift-1), 1<<(shift-1)))
	}
	rebiased := magnitude - 0x38000000
	return sign | Float16(round(rebiased>>13, rebiased&0x1fff, 0x1000))
}

// Float32 is b's exact value.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// BFloat16From rounds x to the nearest bfloat16, ties to even.
func BFloat16From(x float32) BFloat16 {
	bits := math.Float32bits(x)
	if bits&0x7fffffff > 0x7f800000 {
		return BFloat16(bits>>16 | 0x40)
	}
	return BFloat16((bits + 0x7fff + (bits>>16)&1) >> 16)
}

// Size is the number of bytes per element (0 for an unknown dtype).
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case F64, I64:
		return 8
	case Bool:
		return 1
	case F16, BF16:
		return 2
	}
	return 0 // Q8_0 (34 bytes per block of 32) and unknown dtypes
}

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case F64:
		return "f64"
	case I32:
		return "i32"
	case I64:
		return "i64"
	case Bool:
		return "bool"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case Q8_0:
		return "q8_0"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// TensorType is the dtype and shape of a traced value or a program's input/output.
type TensorType struct {
	DType DType
	Shape []int64
}

// Target is where a program runs.
type Target int

// The targets (tm_target). GPU fails with StatusUnsupported in builds without one.
const (
	CPU Target = C.TM_TARGET_CPU
	GPU Target = C.TM_TARGET_GPU
)

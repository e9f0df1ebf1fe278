// Package rawabi calls the C API with raw memory, for tests of the C contract that the
// tinymlir package never exercises: options structs of other layouts' sizes (versioned by
// struct_size) and the snprintf-style size queries. Go test files cannot use cgo, so the
// calls live here; the tests are in rawabi_test.go. Internal: not part of the bindings' API.
package rawabi

/*
#cgo pkg-config: tinymlir
#include <stdlib.h>
#include <tinymlir/gpt2.h>

static size_t rawabi_sizeof(int which) {
  switch (which) {
    case 0: return sizeof(tm_compile_options);
    case 1: return sizeof(tm_generate_options);
    case 2: return sizeof(tm_model_options);
    default: return sizeof(tm_model_stats);
  }
}

static void rawabi_init(int which, void *buf) {
  switch (which) {
    case 0: tm_compile_options_init((tm_compile_options *)buf); break;
    case 1: tm_generate_options_init((tm_generate_options *)buf); break;
    case 2: tm_model_options_init((tm_model_options *)buf); break;
    default: break;
  }
}

static tm_status rawabi_compile(tm_context *ctx, tm_trace *trace, const void *options) {
  tm_program *program = NULL;
  tm_status s = tm_compile(ctx, trace, (const tm_compile_options *)options, &program);
  tm_program_release(program);
  return s;
}

static tm_status rawabi_load(tm_context *ctx, const char *dir, const void *options) {
  tm_model *model = NULL;
  tm_status s = tm_model_load(ctx, dir, (const tm_model_options *)options, &model);
  tm_model_destroy(model);
  return s;
}

static tm_status rawabi_generate(tm_model *model, const void *options, size_t *n_out) {
  int32_t prompt[3] = {1, 2, 3}, ids[64];
  return tm_generate(model, prompt, 3, (const tm_generate_options *)options, NULL, NULL, ids,
                     64, n_out);
}

static tm_status rawabi_trace(tm_context *ctx, tm_trace **out) {
  int64_t shape[1] = {2};
  tm_value x;
  tm_status s = tm_trace_begin(ctx, "rawabi", out);
  if (s == TM_OK) s = tm_op_input(*out, TM_F32, 1, shape, &x);
  if (s == TM_OK) s = tm_trace_end(*out, &x, 1);
  return s;
}
*/
import "C"

import (
	"unsafe"
)

// Struct names the options structs.
type Struct int

// The versioned structs.
const (
	CompileOptions Struct = iota
	GenerateOptions
	ModelOptions
	ModelStats
)

// OK, InvalidArgument and Unsupported are the statuses the tests compare with.
const (
	OK              = int(C.TM_OK)
	InvalidArgument = int(C.TM_ERROR_INVALID_ARGUMENT)
	Unsupported     = int(C.TM_ERROR_UNSUPPORTED)
)

// Sizeof is sizeof(struct) in the header this package was compiled with.
func Sizeof(s Struct) int { return int(C.rawabi_sizeof(C.int(s))) }

// Buffer is memory for one options struct and spare bytes after it, 8-byte aligned.
type Buffer struct{ words []uint64 }

// NewBuffer returns a zeroed buffer of at least n bytes, filled by the struct's
// *_options_init (stats have none: zeros).
func NewBuffer(s Struct, n int) *Buffer {
	if n < Sizeof(s) {
		n = Sizeof(s)
	}
	b := &Buffer{words: make([]uint64, (n+7)/8)}
	C.rawabi_init(C.int(s), b.ptr())
	return b
}

func (b *Buffer) ptr() unsafe.Pointer { return unsafe.Pointer(&b.words[0]) }

// Bytes is the buffer's memory.
func (b *Buffer) Bytes() []byte { return unsafe.Slice((*byte)(b.ptr()), 8*len(b.words)) }

// SetSize sets struct_size, the first field of every options struct.
func (b *Buffer) SetSize(size uint32) { *(*uint32)(b.ptr()) = size }

// SetInt32 writes an int32 field at a byte offset.
func (b *Buffer) SetInt32(offset int, v int32) { *(*int32)(unsafe.Pointer(&b.Bytes()[offset])) = v }

// LastError is tm_last_error of the calling thread; call it right after the failing call,
// with the goroutine locked to its thread.
func LastError() string { return C.GoString(C.tm_last_error()) }

// Env holds the handles the calls need: a context, an ended trace, a model.
type Env struct {
	ctx   *C.tm_context
	trace *C.tm_trace
	model *C.tm_model
	dir   *C.char
}

// NewEnv creates the handles, with the model loaded from dir.
func NewEnv(dir string) (*Env, int) {
	e := &Env{dir: C.CString(dir)}
	if s := C.tm_context_create(&e.ctx); s != C.TM_OK {
		return nil, int(s)
	}
	if s := C.rawabi_trace(e.ctx, &e.trace); s != C.TM_OK {
		return nil, int(s)
	}
	if s := C.tm_model_load(e.ctx, e.dir, nil, &e.model); s != C.TM_OK {
		return nil, int(s)
	}
	return e, OK
}

// Close frees the handles.
func (e *Env) Close() {
	C.tm_model_destroy(e.model)
	C.tm_trace_destroy(e.trace)
	C.tm_context_release(e.ctx)
	C.free(unsafe.Pointer(e.dir))
}

// Call runs the call that takes struct s, with the options (or stats) in b.
func (e *Env) Call(s Struct, b *Buffer) int {
	switch s {
	case CompileOptions:
		return int(C.rawabi_compile(e.ctx, e.trace, b.ptr()))
	case GenerateOptions:
		var n C.size_t
		return int(C.rawabi_generate(e.model, b.ptr(), &n))
	case ModelOptions:
		return int(C.rawabi_load(e.ctx, e.dir, b.ptr()))
	default:
		return int(C.tm_model_get_stats(e.model, (*C.tm_model_stats)(b.ptr())))
	}
}

// Tokenize is tm_tokenize with a buffer of the given capacity (nil when 0): the ids written
// and the count reported.
func (e *Env) Tokenize(text string, capacity int) (ids []int32, needed int, status int) {
	t := C.CString(text)
	defer C.free(unsafe.Pointer(t))
	buf := make([]int32, capacity+1)
	var ptr *C.int32_t
	if capacity > 0 {
		ptr = (*C.int32_t)(unsafe.Pointer(&buf[0]))
	}
	var n C.size_t
	s := C.tm_tokenize(e.model, t, C.size_t(len(text)), ptr, C.size_t(capacity), &n)
	return buf[:capacity], int(n), int(s)
}

// Detokenize is tm_detokenize with a buffer of the given capacity (nil when 0).
func (e *Env) Detokenize(ids []int32, capacity int) (text []byte, needed int, status int) {
	buf := make([]byte, capacity+1)
	var ptr *C.char
	if capacity > 0 {
		ptr = (*C.char)(unsafe.Pointer(&buf[0]))
	}
	var n C.size_t
	s := C.tm_detokenize(e.model, (*C.int32_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids)), ptr,
		C.size_t(capacity), &n)
	return buf[:capacity], int(n), int(s)
}

package tinymlir

/*
#include <tinymlir/tinymlir.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Context owns the compiled-program cache. It is safe for concurrent use (the C context
// is thread-safe: compiles from several goroutines may share it). Models and programs keep
// their own references to what they need, so a context may be closed before them.
type Context struct {
	// mu guards c: calls share it, Close takes it alone, so closing cannot free the
	// context under a running call.
	mu sync.RWMutex
	c  *C.tm_context
}

// CacheStats are the cache's counters.
type CacheStats struct {
	Hits    uint64 // compiles answered from the cache
	Misses  uint64 // compiles that built a program
	Entries uint64 // programs currently cached
}

// NewContext creates a context. It fails with StatusUnsupported when the loaded library's
// ABI version differs from the header's: every struct layout would then be suspect.
func NewContext() (*Context, error) {
	if err := checkABI(); err != nil {
		return nil, err
	}
	ctx := &Context{}
	if err := call(func() C.tm_status { return C.tm_context_create(&ctx.c) }); err != nil {
		return nil, err
	}
	runtime.SetFinalizer(ctx, (*Context).Close)
	return ctx, nil
}

// Close drops this reference to the context; models loaded in it keep their own, and
// programs stay valid. Closing twice is fine.
func (ctx *Context) Close() error {
	if ctx == nil {
		return nil
	}
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	runtime.SetFinalizer(ctx, nil)
	C.tm_context_release(ctx.c) // accepts NULL
	ctx.c = nil
	return nil
}

// use runs f with the C context, shared with other calls.
func (ctx *Context) use(f func(*C.tm_context) error) error {
	if ctx == nil {
		return newError(StatusInvalidArgument, "the context is nil")
	}
	ctx.mu.RLock()
	defer ctx.mu.RUnlock()
	if ctx.c == nil {
		return newError(StatusInvalidArgument, "the context is closed")
	}
	return f(ctx.c)
}

// Compile compiles an ended trace (options nil = the defaults), or returns the cached
// program of an equal trace. Close the program when done.
func (ctx *Context) Compile(trace *Trace, options *CompileOptions) (*Program, error) {
	opts := DefaultCompileOptions()
	if options != nil {
		opts = *options
	}
	raw, err := opts.raw()
	if err != nil {
		return nil, err
	}
	var p *C.tm_program
	err = ctx.use(func(c *C.tm_context) error {
		return trace.use(func(t *C.tm_trace) error {
			return call(func() C.tm_status { return C.tm_compile(c, t, &raw, &p) })
		})
	})
	if err != nil {
		return nil, err
	}
	return newProgram(p), nil
}

// CacheStats returns the cache's counters.
func (ctx *Context) CacheStats() (CacheStats, error) {
	var info C.tm_cache_info
	info.struct_size = C.uint32_t(unsafe.Sizeof(info))
	err := ctx.use(func(c *C.tm_context) error {
		return call(func() C.tm_status { return C.tm_cache_get_info(c, &info) })
	})
	return CacheStats{Hits: uint64(info.hits), Misses: uint64(info.misses), Entries: uint64(info.entries)}, err
}

// CompileOptions are tm_compile_options; DefaultCompileOptions gives the library's
// defaults (CPU, fusion, BLAS, -O3).
type CompileOptions struct {
	Target   Target
	Optimize bool // canonicalize/cse/elementwise fusion
	UseBLAS  bool // matmuls become cblas_sgemm/dgemm calls
	OptLevel int  // LLVM optimisation level 0..3
}

// DefaultCompileOptions returns the library's defaults (tm_compile_options_init).
func DefaultCompileOptions() CompileOptions {
	var raw C.tm_compile_options
	C.tm_compile_options_init(&raw)
	return CompileOptions{
		Target:   Target(raw.target),
		Optimize: raw.optimize != 0,
		UseBLAS:  raw.use_blas != 0,
		OptLevel: int(raw.opt_level),
	}
}

func (o CompileOptions) raw() (C.tm_compile_options, error) {
	// From init, so struct_size (and any field not exposed here) is right.
	var raw C.tm_compile_options
	C.tm_compile_options_init(&raw)
	level, err := int32Arg("CompileOptions.OptLevel", o.OptLevel)
	if err != nil {
		return raw, err
	}
	raw.target = C.tm_target(o.Target)
	raw.optimize = cbool(o.Optimize)
	raw.use_blas = cbool(o.UseBLAS)
	raw.opt_level = level
	return raw, nil
}

func cbool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

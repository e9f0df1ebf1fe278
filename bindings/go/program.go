package tinymlir

/*
#include <stdlib.h>
#include <tinymlir/tinymlir.h>

static void tmg_set_tensor_data(tm_tensor *t, void *data) { t->data = data; }
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Element is a Go type whose memory is exactly one DType's.
type Element interface {
	float32 | float64 | int32 | int64 | bool | Float16 | BFloat16
}

// Tensor is a Go slice seen as a C-contiguous tensor of a shape, or a part of a
// DeviceBuffer (DeviceBuffer.Tensor). Invoke copies a slice's tensor to C memory and back
// (see Program.Invoke); a buffer's it passes in place.
type Tensor struct {
	dtype DType
	shape []int64
	data  unsafe.Pointer // the slice's first element (nil when empty); keeps it alive
	len   int
	// A device buffer's tensor: its memory (C's, never Go's) and the buffer, kept alive.
	device unsafe.Pointer
	buffer *DeviceBuffer
}

// NewTensor views data as a tensor of the given shape (none: a scalar). The length is
// checked against the shape when the tensor is used.
func NewTensor[T Element](data []T, shape ...int64) Tensor {
	var dtype DType
	switch any(data).(type) {
	case []float32:
		dtype = F32
	case []float64:
		dtype = F64
	case []int32:
		dtype = I32
	case []int64:
		dtype = I64
	case []bool:
		dtype = Bool
	case []Float16:
		dtype = F16
	case []BFloat16:
		dtype = BF16
	}
	t := Tensor{dtype: dtype, shape: append([]int64(nil), shape...), len: len(data)}
	if len(data) > 0 {
		t.data = unsafe.Pointer(&data[0])
	}
	return t
}

// DType is the tensor's element type.
func (t Tensor) DType() DType { return t.dtype }

// Shape is the tensor's shape.
func (t Tensor) Shape() []int64 { return t.shape }

// nbytes checks the shape against the slice and returns the data size in bytes (none to
// copy for a device buffer's tensor, whose shape was checked when it was made).
func (t Tensor) nbytes() (int, error) {
	if t.device != nil {
		return 0, nil
	}
	if len(t.shape) > MaxRank {
		return 0, newError(StatusShape, "rank %d exceeds the maximum %d", len(t.shape), MaxRank)
	}
	count := int64(1)
	for _, d := range t.shape {
		if d < 0 {
			return 0, newError(StatusShape, "negative dimension %d in shape %v", d, t.shape)
		}
		count *= d
	}
	if count != int64(t.len) {
		return 0, newError(StatusShape, "shape %v has %d elements but the slice has %d", t.shape, count, t.len)
	}
	return t.len * t.dtype.Size(), nil
}

// bytes is the tensor's data as bytes (n of them, from nbytes).
func (t Tensor) bytes(n int) []byte {
	return unsafe.Slice((*byte)(t.data), n)
}

// withCTensors builds tm_tensor views of inputs and outputs in C memory, calls f with the
// first input view and the first output view, then copies the outputs back to their
// slices (only if f succeeded).
//
// Why copies: the cgo rules let C read Go memory only through pointers passed as call
// arguments, and forbid Go from storing Go pointers in C memory, so an array of tm_tensor
// views (each holding a data pointer) cannot point at Go slices without runtime.Pinner
// (Go 1.21). Views, shapes and data therefore live in one C allocation for the call.
func withCTensors(inputs, outputs []Tensor, f func(in, out *C.tm_tensor) error) error {
	all := append(append([]Tensor(nil), inputs...), outputs...)
	const align = 16 // malloc's alignment, kept for each tensor's data
	// Layout: the views, then the shapes, then each tensor's data at dataAt[i].
	size := len(all) * int(unsafe.Sizeof(C.tm_tensor{}))
	sizes := make([]int, len(all))
	for i, t := range all {
		n, err := t.nbytes()
		if err != nil {
			e := err.(*Error)
			if i < len(inputs) {
				return newError(e.Status, "input %d: %s", i, e.Message)
			}
			return newError(e.Status, "output %d: %s", i-len(inputs), e.Message)
		}
		sizes[i] = n
		size += 8 * len(t.shape)
	}
	shapesAt := len(all) * int(unsafe.Sizeof(C.tm_tensor{}))
	dataAt := make([]int, len(all))
	for i, n := range sizes {
		size = (size + align - 1) / align * align
		dataAt[i] = size
		size += n
	}
	// One spare byte, so that an empty tensor at the end still gets a non-null data pointer
	// inside the allocation (NULL data is an error even when nothing is read).
	arena := C.malloc(C.size_t(size + 1))
	if arena == nil {
		return newError(StatusOutOfMemory, "cannot allocate %d bytes for tensor views", size)
	}
	defer C.free(arena)
	mem := unsafe.Slice((*byte)(arena), size+1)
	views := unsafe.Slice((*C.tm_tensor)(arena), len(all))
	next := shapesAt
	for i, t := range all {
		views[i] = C.tm_tensor{
			dtype: C.tm_dtype(t.dtype),
			rank:  C.int32_t(len(t.shape)),
		}
		// data is a member of an anonymous union (data / const_data), which cgo cannot name.
		if t.device != nil {
			C.tmg_set_tensor_data(&views[i], t.device)
		} else {
			C.tmg_set_tensor_data(&views[i], unsafe.Pointer(&mem[dataAt[i]]))
		}
		if len(t.shape) > 0 {
			shape := unsafe.Slice((*int64)(unsafe.Pointer(&mem[next])), len(t.shape))
			copy(shape, t.shape)
			views[i].shape = (*C.int64_t)(unsafe.Pointer(&shape[0]))
			next += 8 * len(t.shape)
		}
		if i < len(inputs) {
			copy(mem[dataAt[i]:dataAt[i]+sizes[i]], t.bytes(sizes[i]))
		}
	}
	var in, out *C.tm_tensor
	if len(inputs) > 0 {
		in = &views[0]
	}
	if len(outputs) > 0 {
		out = &views[len(inputs)]
	}
	// Each device buffer stays open for the call (Close waits for it): its memory is in the
	// views.
	held := map[*DeviceBuffer]bool{}
	defer func() {
		for b := range held {
			b.mu.RUnlock()
		}
	}()
	for i, t := range all {
		if t.buffer == nil || held[t.buffer] {
			continue
		}
		t.buffer.mu.RLock()
		held[t.buffer] = true
		if t.buffer.c == nil {
			if i < len(inputs) {
				return newError(StatusInvalidArgument, "input %d: its device buffer is closed", i)
			}
			return newError(StatusInvalidArgument, "output %d: its device buffer is closed", i-len(inputs))
		}
	}
	if err := f(in, out); err != nil {
		return err
	}
	for i := len(inputs); i < len(all); i++ {
		copy(all[i].bytes(sizes[i]), mem[dataAt[i]:dataAt[i]+sizes[i]])
	}
	return nil
}

// Program is a compiled program. It is immutable and safe for concurrent Invoke calls.
// Programs are reference-counted: Clone adds a reference, Close drops one; a program
// outlives the context and the trace it came from.
type Program struct {
	// mu guards c: calls share it, Close takes it alone.
	mu sync.RWMutex
	c  *C.tm_program
}

func newProgram(c *C.tm_program) *Program {
	p := &Program{c: c}
	runtime.SetFinalizer(p, (*Program).Close)
	return p
}

// Close drops this reference. Closing twice is fine.
func (p *Program) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	runtime.SetFinalizer(p, nil)
	C.tm_program_release(p.c) // accepts NULL
	p.c = nil
	return nil
}

func (p *Program) use(f func(*C.tm_program) error) error {
	if p == nil {
		return newError(StatusInvalidArgument, "the program is nil")
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.c == nil {
		return newError(StatusInvalidArgument, "the program is closed")
	}
	return f(p.c)
}

// Export writes the program to path as one self-contained file (tm_program_export).
func (p *Program) Export(path string) error {
	cpath, err := cString("the program file", path)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cpath))
	return p.use(func(c *C.tm_program) error {
		return call(func() C.tm_status { return C.tm_program_export(c, cpath) })
	})
}

// LoadProgram loads a program written by Export, linked without the compiler
// (tm_program_load).
func LoadProgram(path string) (*Program, error) {
	if err := checkABI(); err != nil {
		return nil, err
	}
	cpath, err := cString("the program file", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cpath))
	var c *C.tm_program
	if err := call(func() C.tm_status { return C.tm_program_load(cpath, &c) }); err != nil {
		return nil, err
	}
	return newProgram(c), nil
}

// Clone returns a new reference to the same program (tm_program_retain).
func (p *Program) Clone() (*Program, error) {
	var clone *Program
	err := p.use(func(c *C.tm_program) error {
		C.tm_program_retain(c)
		clone = newProgram(c)
		return nil
	})
	return clone, err
}

// CacheHit tells whether the Compile that returned this program found it in the context's
// cache (compiled earlier for an equal trace and equal options) rather than compiling it
// (tm_program_cache_hit). A clone answers as the program it was cloned from; false once
// closed.
func (p *Program) CacheHit() bool {
	hit := false
	_ = p.use(func(c *C.tm_program) error { hit = C.tm_program_cache_hit(c) != 0; return nil })
	return hit
}

// NumInputs is the number of inputs (0 once closed).
func (p *Program) NumInputs() int {
	n := 0
	_ = p.use(func(c *C.tm_program) error { n = int(C.tm_program_num_inputs(c)); return nil })
	return n
}

// NumOutputs is the number of outputs (0 once closed).
func (p *Program) NumOutputs() int {
	n := 0
	_ = p.use(func(c *C.tm_program) error { n = int(C.tm_program_num_outputs(c)); return nil })
	return n
}

// InputType is the type input i is specialised to.
func (p *Program) InputType(i int) (TensorType, error) { return p.ioType(i, true) }

// OutputType is the type output i is specialised to.
func (p *Program) OutputType(i int) (TensorType, error) { return p.ioType(i, false) }

func (p *Program) ioType(i int, input bool) (TensorType, error) {
	index, err := int32Arg("the index", i)
	if err != nil {
		return TensorType{}, err
	}
	var dtype C.tm_dtype
	var rank C.int32_t
	var shape [MaxRank]C.int64_t
	err = p.use(func(c *C.tm_program) error {
		return call(func() C.tm_status {
			if input {
				return C.tm_program_input_type(c, index, &dtype, &rank, &shape[0])
			}
			return C.tm_program_output_type(c, index, &dtype, &rank, &shape[0])
		})
	})
	if err != nil {
		return TensorType{}, err
	}
	return tensorType(dtype, rank, shape[:]), nil
}

// Stage is a compilation stage whose text a program keeps.
type Stage int

// The stages (tm_stage).
const (
	StageTraced     Stage = C.TM_STAGE_TRACED     // as built from the trace, before any pass
	StageOptimized  Stage = C.TM_STAGE_OPTIMIZED  // after canonicalize, cse, elementwise fusion
	StageBufferized Stage = C.TM_STAGE_BUFFERIZED // after one-shot bufferization
	StageLowered    Stage = C.TM_STAGE_LOWERED    // after the BLAS rewrite and LLVM lowering
	StageLLVMIR     Stage = C.TM_STAGE_LLVM_IR    // the LLVM IR handed to the JIT
	StageAssembly   Stage = C.TM_STAGE_ASSEMBLY   // native assembly (CPU) or PTX (GPU)
)

// IR returns the text of one compilation stage (tm_program_ir_text: its size, then the
// text into a buffer of ours).
func (p *Program) IR(stage Stage) (string, error) {
	var text string
	err := p.use(func(c *C.tm_program) error {
		var n C.size_t
		if err := call(func() C.tm_status {
			return C.tm_program_ir_text(c, C.tm_stage(stage), nil, 0, &n)
		}); err != nil {
			return err
		}
		buf := (*C.char)(C.malloc(n + 1))
		if buf == nil {
			return newError(StatusOutOfMemory, "cannot allocate %d bytes for the stage text", int(n)+1)
		}
		defer C.free(unsafe.Pointer(buf))
		if err := call(func() C.tm_status {
			return C.tm_program_ir_text(c, C.tm_stage(stage), buf, n+1, &n)
		}); err != nil {
			return err
		}
		text = C.GoStringN(buf, C.int(n))
		return nil
	})
	return text, err
}

// Invoke runs the program: it reads inputs and writes outputs, which must match the
// program's specialisation (dtype, rank, shape). Slices' inputs are copied to C memory and
// outputs copied back (see withCTensors), a DeviceBuffer's tensors are passed in place; on
// error the slices' outputs are left unchanged.
func (p *Program) Invoke(inputs, outputs []Tensor) error {
	return p.use(func(c *C.tm_program) error {
		return withCTensors(inputs, outputs, func(in, out *C.tm_tensor) error {
			return call(func() C.tm_status {
				return C.tm_invoke(c, in, C.int32_t(len(inputs)), out, C.int32_t(len(outputs)))
			})
		})
	})
}

package tinymlir

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// affineProgram compiles y = 3 x + 1 over n float32s for target.
func affineProgram(t *testing.T, ctx *Context, target Target, n int64) *Program {
	v := must[Value](t)
	tr := must[*Trace](t)(NewTrace(ctx, "affine"))
	defer tr.Close()
	x := v(tr.Input(F32, n))
	y := v(tr.Add(v(tr.Mul(x, v(tr.Scalar(F32, 3)))), v(tr.Scalar(F32, 1))))
	check(t, tr.End(y))
	options := DefaultCompileOptions()
	options.Target = target
	p := must[*Program](t)(ctx.Compile(tr, &options))
	t.Cleanup(func() { p.Close() })
	return p
}

func affineOf(xs []float32) []float32 {
	ys := make([]float32, len(xs))
	for i, x := range xs {
		ys[i] = float32(3*float64(x) + 1)
	}
	return ys
}

func sameFloats(t *testing.T, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func TestADeviceBufferTakesBytesInOutCopiedAndFilled(t *testing.T) {
	a := must[*DeviceBuffer](t)(NewDeviceBuffer(CPU, 64))
	b := must[*DeviceBuffer](t)(NewDeviceBuffer(CPU, 64))
	defer a.Close()
	defer b.Close()
	if a.Len() != 64 || a.Target() != CPU {
		t.Fatalf("len %d, target %v", a.Len(), a.Target())
	}
	words := make([]float32, 16)
	check(t, Read(a, 0, words))
	sameFloats(t, words, make([]float32, 16))
	check(t, Write(a, 8, []float32{1.5, 2.5}))
	check(t, a.Fill(16, 0x40, 4))
	check(t, b.CopyFrom(32, a, 8, 16))
	check(t, Read(b, 0, words))
	want := make([]float32, 16)
	want[8], want[9], want[10] = 1.5, 2.5, 3.0039215
	sameFloats(t, words, want)
}

func TestAProgramRunsOnDeviceBuffersInPlace(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	const n = 1000
	p := affineProgram(t, ctx, CPU, n)
	buf := must[*DeviceBuffer](t)(NewDeviceBuffer(CPU, 8*n+64))
	defer buf.Close()
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i%97)*0.25 - 3
	}
	check(t, Write(buf, 64, xs))
	x := must[Tensor](t)(buf.Tensor(F32, 64, n))
	y := must[Tensor](t)(buf.Tensor(F32, 64+4*n, n))
	check(t, p.Invoke([]Tensor{x}, []Tensor{y}))
	ys := make([]float32, n)
	check(t, Read(buf, 64+4*n, ys))
	sameFloats(t, ys, affineOf(xs))
	zs := make([]float32, n) // a buffer's tensor and a slice's in one call
	check(t, p.Invoke([]Tensor{y}, []Tensor{NewTensor(zs, n)}))
	sameFloats(t, zs, affineOf(ys))
}

func TestDeviceBufferErrorsAreNamed(t *testing.T) {
	buf := must[*DeviceBuffer](t)(NewDeviceBuffer(CPU, 64))
	e := wantStatus(t, Write(buf, 60, []float32{0, 0}), StatusOutOfRange)
	if !strings.Contains(e.Message, "bytes [60, 60 + 8) of the buffer lie outside it") {
		t.Error(e)
	}
	_, err := buf.Tensor(F32, 4, 16)
	wantStatus(t, err, StatusOutOfRange)
	_, err = NewDeviceBuffer(CPU, 0)
	wantStatus(t, err, StatusInvalidArgument)
	wantStatus(t, buf.CopyFrom(0, buf, 4, 8), StatusInvalidArgument)
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	p := affineProgram(t, ctx, CPU, 4)
	x := must[Tensor](t)(buf.Tensor(F32, 0, 4))
	buf.Close()
	wantStatus(t, Read(buf, 0, make([]float32, 1)), StatusInvalidArgument)
	e = wantStatus(t, p.Invoke([]Tensor{x}, []Tensor{NewTensor(make([]float32, 4), 4)}), StatusInvalidArgument)
	if !strings.Contains(e.Message, "input 0: its device buffer is closed") {
		t.Error(e)
	}
}

// On the GPU target, in a child process on the software CUDA device: two programs chained
// through buffers, equal to the double loop.
func TestGpuProgramsChainThroughDeviceBuffers(t *testing.T) {
	if os.Getenv("TINYMLIR_GO_GPU_CHILD") == "1" {
		gpuChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGpuProgramsChainThroughDeviceBuffers$", "-test.v")
	cmd.Env = append(os.Environ(), "TINYMLIR_GO_GPU_CHILD=1", "TINYMLIR_CUDA_DRIVER=software",
		"TINYMLIR_SOFTWARE_GPU_MEMORY=256M")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestGpuProgramsChainThroughDeviceBuffers") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func gpuChild(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	const n = 4096
	p := affineProgram(t, ctx, GPU, n)
	buf := must[*DeviceBuffer](t)(NewDeviceBuffer(GPU, 3*4*n))
	defer buf.Close()
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i%13) - 6
	}
	check(t, Write(buf, 0, xs))
	x := must[Tensor](t)(buf.Tensor(F32, 0, n))
	y := must[Tensor](t)(buf.Tensor(F32, 4*n, n))
	z := must[Tensor](t)(buf.Tensor(F32, 8*n, n))
	check(t, p.Invoke([]Tensor{x}, []Tensor{y}))
	check(t, p.Invoke([]Tensor{y}, []Tensor{z}))
	zs := make([]float32, n)
	check(t, Read(buf, 8*n, zs))
	sameFloats(t, zs, affineOf(affineOf(xs)))
}

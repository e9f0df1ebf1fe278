package tinymlir

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"tinymlir.dev/tinymlir/internal/genops"
)

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantStatus checks that err is an *Error with the given status and returns it.
func wantStatus(t *testing.T, err error, status Status) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a %v error, got %v", status, err)
	}
	if e.Status != status {
		t.Fatalf("want %v, got %v", status, e)
	}
	return e
}

var (
	affineX    = []float32{-2, -1, 0, 1, 2, 3, 4, 5}
	affineGain = []float32{1, 2, 3, 4}
	affineBias = []float32{0.5, 0, -1, 2}
)

// affine traces the affine example, (x * gain + bias) * 0.5: three elementwise ops that
// fusion makes one loop.
func affine(t *testing.T, ctx *Context) *Trace {
	v := must[Value](t)
	tr := must[*Trace](t)(NewTrace(ctx, "affine_activation"))
	x := v(tr.Input(F32, 2, 4))
	gain := v(tr.Input(F32, 4))
	bias := v(tr.Input(F32, 4))
	half := v(tr.Scalar(F32, 0.5))
	y := v(tr.Mul(v(tr.Add(v(tr.Mul(x, gain)), bias)), half))
	check(t, tr.End(y))
	return tr
}

// compiledAffine is a context and the affine program compiled in it, closed when the test
// ends.
func compiledAffine(t *testing.T) (*Context, *Program) {
	ctx := must[*Context](t)(NewContext())
	tr := affine(t, ctx)
	p := must[*Program](t)(ctx.Compile(tr, nil))
	t.Cleanup(func() { p.Close(); tr.Close(); ctx.Close() })
	return ctx, p
}

func runAffine(p *Program) ([]float32, error) {
	ys := make([]float32, 8)
	err := p.Invoke(
		[]Tensor{NewTensor(affineX, 2, 4), NewTensor(affineGain, 4), NewTensor(affineBias, 4)},
		[]Tensor{NewTensor(ys, 2, 4)})
	return ys, err
}

func TestAffineFusesThreeGenericsIntoOne(t *testing.T) {
	_, p := compiledAffine(t)
	for stage, want := range map[Stage]int{StageTraced: 3, StageOptimized: 1} {
		ir := must[string](t)(p.IR(stage))
		if got := strings.Count(ir, "linalg.generic"); got != want {
			t.Errorf("stage %d: %d linalg.generic, want %d", stage, got, want)
		}
	}
	ys := must[[]float32](t)(runAffine(p))
	for i, y := range ys {
		want := (affineX[i]*affineGain[i%4] + affineBias[i%4]) * 0.5
		if math.Abs(float64(y-want)) > 1e-6 {
			t.Errorf("y[%d] = %v, want %v", i, y, want)
		}
	}
}

func TestProgramTypesCacheClonesAndClose(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	tr := affine(t, ctx)
	p := must[*Program](t)(ctx.Compile(tr, nil))
	if p.NumInputs() != 3 || p.NumOutputs() != 1 {
		t.Fatalf("%d inputs, %d outputs", p.NumInputs(), p.NumOutputs())
	}
	in1 := must[TensorType](t)(p.InputType(1))
	out0 := must[TensorType](t)(p.OutputType(0))
	if in1.DType != F32 || len(in1.Shape) != 1 || in1.Shape[0] != 4 || len(out0.Shape) != 2 {
		t.Fatalf("input 1 %+v, output 0 %+v", in1, out0)
	}
	wantStatus(t, errOf(p.InputType(3)), StatusOutOfRange)

	// An equal trace is a cache hit, and the program says so.
	again := must[*Program](t)(ctx.Compile(affine(t, ctx), nil))
	stats := must[CacheStats](t)(ctx.CacheStats())
	if stats != (CacheStats{Hits: 1, Misses: 1, Entries: 1}) {
		t.Fatalf("cache stats %+v", stats)
	}
	if p.CacheHit() || !again.CacheHit() {
		t.Fatalf("first CacheHit %v, second %v", p.CacheHit(), again.CacheHit())
	}
	opts := DefaultCompileOptions()
	opts.OptLevel = 1 // other options: another program
	other := must[*Program](t)(ctx.Compile(tr, &opts))
	if other.CacheHit() {
		t.Fatal("other options hit the cache")
	}
	check(t, other.Close())
	// Programs outlive trace and context; a clone outlives the original. Close is idempotent.
	clone := must[*Program](t)(again.Clone())
	if !clone.CacheHit() {
		t.Fatal("a clone answers as its program")
	}
	for _, c := range []interface{ Close() error }{tr, p, again, ctx, tr, ctx, again} {
		check(t, c.Close())
	}
	ys := must[[]float32](t)(runAffine(clone))
	if ys[7] != (5*4+2)*0.5 {
		t.Fatalf("ys = %v", ys)
	}
	check(t, clone.Close())
	wantStatus(t, errOf(runAffine(clone)), StatusInvalidArgument)
	wantStatus(t, errOf(tr.Input(F32)), StatusInvalidArgument)
	wantStatus(t, errOf(NewTrace(ctx, "closed")), StatusInvalidArgument)
}

func errOf[T any](_ T, err error) error { return err }

func TestProgramsRunOnSeveralGoroutines(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	p := must[*Program](t)(ctx.Compile(affine(t, ctx), nil))
	defer p.Close()
	want := must[[]float32](t)(runAffine(p))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				ys, err := runAffine(p)
				if err == nil && ys[7] != want[7] {
					err = newError(StatusRuntime, "got %v", ys)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// randomValues returns deterministic numbers in [-1, 1).
func randomValues(n int, seed uint64) []float64 {
	out := make([]float64, n)
	state := seed*6364136223846793005 + 1442695040888963407
	for i := range out {
		state = state*6364136223846793005 + 1442695040888963407
		out[i] = float64(state>>11)/float64(uint64(1)<<53)*2 - 1
	}
	return out
}

func TestMatmulMatchesADoubleLoop(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	const m, k, n = 7, 13, 5
	a, b := randomValues(m*k, 1), randomValues(k*n, 2)
	want := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for p := 0; p < k; p++ {
				want[i*n+j] += a[i*k+p] * b[p*n+j]
			}
		}
	}
	compile := func(dtype DType, blas bool) *Program {
		v := must[Value](t)
		tr := must[*Trace](t)(NewTrace(ctx, "matmul"))
		defer tr.Close()
		c := v(tr.Matmul(v(tr.Input(dtype, m, k)), v(tr.Input(dtype, k, n))))
		check(t, tr.End(c))
		opts := DefaultCompileOptions()
		opts.UseBLAS = blas
		return must[*Program](t)(ctx.Compile(tr, &opts))
	}
	for _, blas := range []bool{true, false} {
		p := compile(F32, blas)
		a32, b32, c32 := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
		for i := range a {
			a32[i] = float32(a[i])
		}
		for i := range b {
			b32[i] = float32(b[i])
		}
		check(t, p.Invoke([]Tensor{NewTensor(a32, m, k), NewTensor(b32, k, n)}, []Tensor{NewTensor(c32, m, n)}))
		for i := range want {
			if math.Abs(float64(c32[i])-want[i]) > 1e-5 {
				t.Fatalf("blas=%v: c[%d] = %v, want %v", blas, i, c32[i], want[i])
			}
		}
		p.Close()
	}
	p := compile(F64, true)
	defer p.Close()
	c := make([]float64, m*n)
	check(t, p.Invoke([]Tensor{NewTensor(a, m, k), NewTensor(b, k, n)}, []Tensor{NewTensor(c, m, n)}))
	for i := range want {
		if math.Abs(c[i]-want[i]) > 1e-12 {
			t.Fatalf("c[%d] = %v, want %v", i, c[i], want[i])
		}
	}
}

func TestMatmulWithAHalfWeight(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	const k, n = 70, 33
	a, b := randomValues(k, 5), randomValues(k*n, 6)
	x := make([]float32, k)
	for i := range a {
		x[i] = float32(a[i])
	}
	w16, wb16 := make([]Float16, k*n), make([]BFloat16, k*n)
	for i := range b {
		w16[i], wb16[i] = Float16From(float32(b[i])), BFloat16From(float32(b[i]))
	}
	for _, dtype := range []DType{F16, BF16} {
		v := must[Value](t)
		tr := must[*Trace](t)(NewTrace(ctx, "half_weight"))
		check(t, tr.End(v(tr.Matmul(v(tr.Input(F32, 1, k)), v(tr.Input(dtype, k, n))))))
		p := must[*Program](t)(ctx.Compile(tr, nil))
		tr.Close()
		weight, widen := NewTensor(w16, k, n), func(i int) float64 { return float64(w16[i].Float32()) }
		if dtype == BF16 {
			weight, widen = NewTensor(wb16, k, n), func(i int) float64 { return float64(wb16[i].Float32()) }
		}
		y := make([]float32, n)
		check(t, p.Invoke([]Tensor{NewTensor(x, 1, k), weight}, []Tensor{NewTensor(y, 1, n)}))
		for j := 0; j < n; j++ {
			want := 0.0
			for p := 0; p < k; p++ {
				want += float64(x[p]) * widen(p*n+j)
			}
			if math.Abs(float64(y[j])-want) > 1e-5*math.Abs(want)+1e-5 {
				t.Fatalf("%v: y[%d] = %v, want %v", dtype, j, y[j], want)
			}
		}
		p.Close()
	}
	// Conversions: exact widening, round to nearest even (1 + 2^-11 is a tie: to 1.0).
	if Float16From(1+1.0/2048) != 0x3c00 || Float16From(65520) != 0x7c00 ||
		Float16(1).Float32() != float32(math.Ldexp(1, -24)) || BFloat16From(1+1.0/256) != 0x3f80 {
		t.Errorf("conversions: %#x %#x %v %#x", Float16From(1+1.0/2048), Float16From(65520),
			Float16(1).Float32(), BFloat16From(1+1.0/256))
	}
	// Arithmetic on a half type is refused, naming the way out.
	tr := must[*Trace](t)(NewTrace(ctx, "refused"))
	defer tr.Close()
	h := must[Value](t)(tr.Input(F16, 3))
	_, err := tr.Add(h, h)
	wantStatus(t, err, StatusDType)
	if err == nil || !strings.Contains(err.Error(), "cast to f32") {
		t.Errorf("error %v", err)
	}
}

func TestReductionsComparisonsAndConstants(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	v := must[Value](t)
	tr := must[*Trace](t)(NewTrace(ctx, "misc"))
	defer tr.Close()
	x := v(tr.Input(F32, 2, 3))
	offsets := v(tr.Constant(NewTensor([]float32{10, 20, 30}, 3)))
	sum := v(tr.ReduceSum(v(tr.Add(x, offsets)), -1, false))
	big := v(tr.Greater(x, v(tr.Scalar(F32, 2.5))))
	sliced := v(tr.Slice(v(tr.Transpose(x)), []int64{1, 0}, []int64{3, 2}))
	check(t, tr.End(sum, big, sliced))
	p := must[*Program](t)(ctx.Compile(tr, nil))
	defer p.Close()
	sums, bigs, slice := make([]float32, 2), make([]bool, 6), make([]float32, 4)
	check(t, p.Invoke([]Tensor{NewTensor([]float32{1, 2, 3, 4, 5, 6}, 2, 3)},
		[]Tensor{NewTensor(sums, 2), NewTensor(bigs, 2, 3), NewTensor(slice, 2, 2)}))
	if sums[0] != 66 || sums[1] != 75 {
		t.Errorf("sums = %v", sums)
	}
	if want := []bool{false, false, true, true, true, true}; !equal(bigs, want) {
		t.Errorf("bigs = %v, want %v", bigs, want)
	}
	if want := []float32{2, 5, 3, 6}; !equal(slice, want) {
		t.Errorf("slice = %v, want %v", slice, want)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestShapeErrorNamesTheOp(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	v := must[Value](t)
	tr := must[*Trace](t)(NewTrace(ctx, "errors"))
	defer tr.Close()
	a, b := v(tr.Input(F32, 2, 3)), v(tr.Input(F32, 4, 3))
	e := wantStatus(t, errOf(tr.Add(a, b)), StatusShape)
	for _, word := range []string{"tm_op(add)", "(2,3)", "(4,3)"} {
		if !strings.Contains(e.Message, word) {
			t.Errorf("%q lacks %q", e.Message, word)
		}
	}
	if !strings.HasPrefix(e.Error(), "TM_ERROR_SHAPE: ") {
		t.Errorf("Error() = %q", e.Error())
	}
	e = wantStatus(t, errOf(tr.Matmul(a, b)), StatusShape)
	if !strings.Contains(e.Message, "tm_op(matmul)") {
		t.Errorf("%q lacks tm_op(matmul)", e.Message)
	}
	// Statuses map through; per-axis counts go to the library, which checks them.
	wantStatus(t, errOf(tr.ReduceSum(a, 2, false)), StatusOutOfRange)
	wantStatus(t, errOf(tr.Exp(v(tr.Input(Bool, 3)))), StatusDType)
	for op, e := range map[string]*Error{
		"tm_op(slice)":     wantStatus(t, errOf(tr.Slice(a, []int64{0}, []int64{1})), StatusInvalidArgument),
		"tm_op(transpose)": wantStatus(t, errOf(tr.Transpose(a, 0)), StatusInvalidArgument),
	} {
		if !strings.Contains(e.Message, op) {
			t.Errorf("%q is not the library's message for %s", e.Message, op)
		}
	}
	wantStatus(t, errOf(tr.Transpose(a, 0, 0)), StatusOutOfRange)
	// One count for two slices: slices of different lengths never reach the library.
	wantStatus(t, errOf(tr.Slice(a, []int64{0, 0}, []int64{1})), StatusInvalidArgument)
	wantStatus(t, errOf(ctx.Compile(tr, nil)), StatusInvalidArgument) // not ended

	// The failed ops recorded nothing: the trace still compiles.
	check(t, tr.End(v(tr.Add(a, a))))
	p := must[*Program](t)(ctx.Compile(tr, nil))
	defer p.Close()
	if p.NumInputs() != 3 { // a, b and the bool input
		t.Errorf("%d inputs", p.NumInputs())
	}
}

func TestInvokeChecksTensors(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	v := must[Value](t)
	tr := must[*Trace](t)(NewTrace(ctx, "invoke"))
	defer tr.Close()
	check(t, tr.End(v(tr.Neg(v(tr.Input(F32, 2, 3))))))
	p := must[*Program](t)(ctx.Compile(tr, nil))
	defer p.Close()
	// The slice length against the shape (here), then shape, dtype and counts (library);
	// the output is untouched on error.
	out := []float32{7, 7, 7, 7, 7, 7}
	outs := []Tensor{NewTensor(out, 2, 3)}
	wantStatus(t, p.Invoke([]Tensor{NewTensor(make([]float32, 5), 2, 3)}, outs), StatusShape)
	wantStatus(t, p.Invoke([]Tensor{NewTensor(make([]float32, 6), 3, 2)}, outs), StatusShape)
	wantStatus(t, p.Invoke([]Tensor{NewTensor(make([]float64, 6), 2, 3)}, outs), StatusDType)
	wantStatus(t, p.Invoke(nil, outs), StatusInvalidArgument)
	if out[0] != 7 {
		t.Errorf("output written on error: %v", out)
	}
	// An output that is also the input: the copies keep them apart.
	check(t, p.Invoke([]Tensor{NewTensor(out, 2, 3)}, outs))
	if out[5] != -7 {
		t.Errorf("in-place negation: %v", out)
	}
}

func TestVersions(t *testing.T) {
	if APIVersion() != HeaderAPIVersion || Version() == "" {
		t.Fatalf("library %q ABI %d, header ABI %d", Version(), APIVersion(), HeaderAPIVersion)
	}
	// One version: the library's at run time, the header's, and the installed tinymlir.pc's
	// (all the CMake project version).
	if Version() != HeaderVersion {
		t.Fatalf("library %q, header %q", Version(), HeaderVersion)
	}
	if out, err := exec.Command("pkg-config", "--modversion", "tinymlir").Output(); err != nil {
		t.Logf("pkg-config --modversion tinymlir: %v (not compared)", err)
	} else if pc := strings.TrimSpace(string(out)); pc != Version() {
		t.Fatalf("tinymlir.pc has version %q, the library %q", pc, Version())
	}
}

func TestExportAndLoadAProgram(t *testing.T) {
	_, p := compiledAffine(t)
	path := t.TempDir() + "/affine.tmp"
	check(t, p.Export(path))
	loaded := must[*Program](t)(LoadProgram(path))
	defer loaded.Close()
	want := must[[]float32](t)(runAffine(p))
	got := must[[]float32](t)(runAffine(loaded))
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("y[%d] = %v from the loaded program, %v compiled", i, got[i], want[i])
		}
	}
	_, err := LoadProgram(t.TempDir() + "/missing.tmp")
	if e := wantStatus(t, err, StatusIO); !strings.Contains(e.Message, "missing.tmp") {
		t.Errorf("message %q does not name the file", e.Message)
	}
}

// A Go string may hold a NUL byte, which a C string cannot: every string passed to the C
// API with one is an error, never cut at the NUL (which named another file).
func TestStringsWithANulByteAreRefused(t *testing.T) {
	ctx, p := compiledAffine(t)
	dir := t.TempDir()
	victim := dir + "/victim"
	check(t, os.WriteFile(victim, []byte("precious"), 0o644))
	err := p.Export(victim + "\x00.tmp")
	if e := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(e.Message, "NUL byte") {
		t.Errorf("message %q does not say why", e.Message)
	}
	if kept, _ := os.ReadFile(victim); string(kept) != "precious" {
		t.Errorf("the file before the NUL was overwritten: %q", kept)
	}
	_, err = LoadProgram(victim + "\x00.tmp")
	wantStatus(t, err, StatusInvalidArgument)
	_, err = NewTrace(ctx, "a\x00b")
	wantStatus(t, err, StatusInvalidArgument)
	_, err = LoadModel(ctx, dir+"\x00junk", nil)
	wantStatus(t, err, StatusInvalidArgument)
}

// Nil objects (a failed constructor's result used anyway) are InvalidArgument errors, and
// closing one does nothing, as closing twice: never a panic in the caller's goroutine.
func TestNilObjectsAreErrorsNotPanics(t *testing.T) {
	var ctx *Context
	var tr *Trace
	var p *Program
	var m *Model
	wantStatus(t, errOf(NewTrace(ctx, "x")), StatusInvalidArgument)
	wantStatus(t, errOf(ctx.Compile(tr, nil)), StatusInvalidArgument)
	wantStatus(t, errOf(ctx.CacheStats()), StatusInvalidArgument)
	wantStatus(t, errOf(LoadModel(ctx, "dir", nil)), StatusInvalidArgument)
	wantStatus(t, errOf(tr.Input(F32, 2)), StatusInvalidArgument)
	wantStatus(t, tr.End(), StatusInvalidArgument)
	wantStatus(t, errOf(p.Clone()), StatusInvalidArgument)
	wantStatus(t, p.Export(t.TempDir()+"/p"), StatusInvalidArgument)
	wantStatus(t, errOf(p.InputType(0)), StatusInvalidArgument)
	wantStatus(t, errOf(p.IR(StageTraced)), StatusInvalidArgument)
	wantStatus(t, errOf(runAffine(p)), StatusInvalidArgument)
	if p.NumInputs() != 0 || p.NumOutputs() != 0 || p.CacheHit() {
		t.Error("a nil program answers as a closed one")
	}
	wantStatus(t, errOf(m.Info()), StatusInvalidArgument)
	wantStatus(t, errOf(m.Tokenize("a")), StatusInvalidArgument)
	wantStatus(t, errOf(m.Logits([]int32{1})), StatusInvalidArgument)
	wantStatus(t, errOf(m.Generate([]int32{1}, nil, nil)), StatusInvalidArgument)
	wantStatus(t, errOf(m.Stats()), StatusInvalidArgument)
	if e := wantStatus(t, errOf(m.Detokenize([]int32{1})), StatusInvalidArgument); !strings.Contains(e.Message, "nil") {
		t.Errorf("message %q does not say the model is nil", e.Message)
	}
	for _, c := range []interface{ Close() error }{ctx, tr, p, m} {
		check(t, c.Close())
	}
	// A live context with a nil trace.
	live := must[*Context](t)(NewContext())
	defer live.Close()
	wantStatus(t, errOf(live.Compile(nil, nil)), StatusInvalidArgument)
}

// unary_ops.go is what internal/genops makes of the header (go generate ./...), and names
// every op the library knows, by the library's own names.
func TestUnaryOpsAreGeneratedFromTheHeader(t *testing.T) {
	header, err := os.ReadFile("../../capi/include/tinymlir/tinymlir.h")
	if err != nil {
		t.Fatal(err)
	}
	want, err := genops.Generate(header)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("unary_ops.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("unary_ops.go is stale: run `go generate ./...` in bindings/go")
	}
	if UnaryOpCount() != len(generatedUnaryOps) {
		t.Fatalf("the library knows %d unary ops, unary_ops.go %d", UnaryOpCount(), len(generatedUnaryOps))
	}
	for _, o := range generatedUnaryOps {
		if name := UnaryOpName(o.op); name != o.name {
			t.Errorf("op %d is %q in the library, %q in unary_ops.go", o.op, name, o.name)
		}
	}
	if UnaryOpName(UnaryOp(UnaryOpCount())) != "" {
		t.Error("a value past the last op has a name")
	}
}

// table_ops.go is what internal/genops makes of ops.h (go generate ./...), with every op the
// library's tm_op knows, by the library's own signatures.
func TestTableOpsAreGeneratedFromTheHeader(t *testing.T) {
	header, err := os.ReadFile("../../capi/include/tinymlir/ops.h")
	if err != nil {
		t.Fatal(err)
	}
	want, err := genops.GenerateTableOps(header)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("table_ops.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("table_ops.go is stale: run `go generate ./...` in bindings/go")
	}
	if OpCount() != len(generatedTableOps) {
		t.Fatalf("the library knows %d table ops, table_ops.go %d", OpCount(), len(generatedTableOps))
	}
	for _, o := range generatedTableOps {
		if signature := OpSignature(o.op); signature != o.signature {
			t.Errorf("op %d is %q in the library, %q in table_ops.go", o.op, signature, o.signature)
		}
	}
	if OpSignature(OpKind(OpCount())) != "" {
		t.Error("a kind past the last op has a signature")
	}
}

// A unary op added to the library's table after the named C functions (sigmoid) has a
// generated method (unary_ops.go).
func TestSigmoidMatchesTheFormula(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	tr := must[*Trace](t)(NewTrace(ctx, "sigmoid"))
	defer tr.Close()
	x := must[Value](t)(tr.Input(F32, 8))
	check(t, tr.End(must[Value](t)(tr.Sigmoid(x))))
	p := must[*Program](t)(ctx.Compile(tr, nil))
	defer p.Close()
	ys := make([]float32, 8)
	check(t, p.Invoke([]Tensor{NewTensor(affineX, 8)}, []Tensor{NewTensor(ys, 8)}))
	for i, y := range ys {
		want := 1 / (1 + math.Exp(-float64(affineX[i])))
		if math.Abs(float64(y)-want) > 1e-6 {
			t.Errorf("sigmoid(%v) = %v, want %v", affineX[i], y, want)
		}
	}
}

package rawabi

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The first published layouts (tinymlir.h, gpt2.h), and today's.
var firstLayout = map[Struct]int{CompileOptions: 20, GenerateOptions: 40, ModelOptions: 8, ModelStats: 64}
var currentLayout = map[Struct]int{CompileOptions: 32, GenerateOptions: 56, ModelOptions: 24, ModelStats: 224}

var names = map[Struct]string{CompileOptions: "tm_compile_options", GenerateOptions: "tm_generate_options",
	ModelOptions: "tm_model_options", ModelStats: "tm_model_stats"}

func dataDir(env, fallback string) string {
	if dir := os.Getenv(env); dir != "" {
		return dir
	}
	return fallback
}

func env(t *testing.T, model string) *Env {
	e, status := NewEnv(model)
	if status != OK {
		t.Fatalf("loading %s: status %d", model, status)
	}
	t.Cleanup(e.Close)
	return e
}

// TestOptionsStructsOfOtherSizes: the library accepts any struct_size from the first
// layout up, and a size below it is INVALID_ARGUMENT. The extra bytes of a larger options
// struct (read by the library) must be zero, else UNSUPPORTED; a larger stats struct
// (filled by the library) gets the fields the library has, and its extra bytes are left
// alone.
func TestOptionsStructsOfOtherSizes(t *testing.T) {
	runtime.LockOSThread() // tm_last_error is per thread
	defer runtime.UnlockOSThread()
	e := env(t, filepath.Join(dataDir("TINYMLIR_TEST_DATA_DIR", "../../../../tests/data"), "tiny-a"))
	for _, s := range []Struct{CompileOptions, GenerateOptions, ModelOptions, ModelStats} {
		own := Sizeof(s)
		if own != currentLayout[s] {
			t.Errorf("%s: sizeof %d, today's layout %d", names[s], own, currentLayout[s])
		}
		b := NewBuffer(s, own+8)
		if s == GenerateOptions {
			b.SetInt32(4, 2) // max_new_tokens, right after struct_size
		}
		b.SetSize(uint32(firstLayout[s]))
		if got := e.Call(s, b); got != OK {
			t.Errorf("%s: first layout: status %d: %s", names[s], got, LastError())
		}
		b.SetSize(uint32(own + 8))
		if got := e.Call(s, b); got != OK {
			t.Errorf("%s: newer layout, zero tail: status %d: %s", names[s], got, LastError())
		}
		b.Bytes()[own+5] = 1
		if s == ModelStats {
			if got := e.Call(s, b); got != OK || b.Bytes()[own+5] != 1 || b.Bytes()[0] != byte(own+8) {
				t.Errorf("%s: newer layout: status %d, tail %d, size %d: %s", names[s], got, b.Bytes()[own+5],
					b.Bytes()[0], LastError())
			}
		} else if got := e.Call(s, b); got != Unsupported || !strings.Contains(LastError(), strconv.Itoa(own+8)) {
			t.Errorf("%s: newer layout, non-zero tail: status %d: %s", names[s], got, LastError())
		}
		b.Bytes()[own+5] = 0
		b.SetSize(uint32(firstLayout[s] - 4))
		if got := e.Call(s, b); got != InvalidArgument || !strings.Contains(LastError(), "struct_size") {
			t.Errorf("%s: too small: status %d: %s", names[s], got, LastError())
		}
	}
}

// TestSizeQueries: capacity 0 asks for the size; a small buffer gets what fits and the
// size needed; neither is an error.
func TestSizeQueries(t *testing.T) {
	e := env(t, filepath.Join(dataDir("TINYMLIR_MODELS_DIR", "../../../../models"), "kjv-tiny"))
	text := "And God said, Let there be light: and there was light."
	_, needed, status := e.Tokenize(text, 0)
	if status != OK || needed == 0 {
		t.Fatalf("tokenize, capacity 0: status %d, needed %d", status, needed)
	}
	ids, n, status := e.Tokenize(text, needed)
	if status != OK || n != needed {
		t.Fatalf("tokenize: status %d, %d of %d", status, n, needed)
	}
	head, n, status := e.Tokenize(text, 3)
	if status != OK || n != needed || head[0] != ids[0] || head[2] != ids[2] {
		t.Fatalf("tokenize, capacity 3: status %d, n %d, %v (all: %v)", status, n, head, ids)
	}
	_, length, status := e.Detokenize(ids, 0)
	if status != OK || length != len(text) {
		t.Fatalf("detokenize, capacity 0: status %d, length %d", status, length)
	}
	prefix, length, status := e.Detokenize(ids, 5)
	if status != OK || length != len(text) || string(prefix) != text[:5] {
		t.Fatalf("detokenize, capacity 5: status %d, length %d, %q", status, length, prefix)
	}
}

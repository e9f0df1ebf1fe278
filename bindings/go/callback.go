package tinymlir

// A file with //export may only declare C in its preamble; the C side of the callback
// (the trampoline tm_generate calls) is in model.go.

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
)

// tokenCallback is the state behind the cgo.Handle that Generate (or GenerateBatch) passes
// as the C callback's user pointer: the Go function, and a panic or runtime.Goexit caught
// in it.
type tokenCallback struct {
	f          func(token int32) bool
	batch      func(sequence int, token int32) bool // GenerateBatch's
	panicked   bool
	panicValue any
	exited     bool // the callback called runtime.Goexit (t.FailNow in a test)
}

// goTokenCallback is called by the library, through tmg_token_trampoline, for each token.
//
//export goTokenCallback
func goTokenCallback(handle C.uintptr_t, token C.int32_t) (stop C.int) {
	state := cgo.Handle(handle).Value().(*tokenCallback)
	return state.run(func() bool { return state.f(int32(token)) })
}

// goBatchTokenCallback is called by the library, through tmg_batch_token_trampoline, for
// each token of a batch, with its sequence's index.
//
//export goBatchTokenCallback
func goBatchTokenCallback(handle C.uintptr_t, sequence C.size_t, token C.int32_t) (stop C.int) {
	state := cgo.Handle(handle).Value().(*tokenCallback)
	return state.run(func() bool { return state.batch(int(sequence), int32(token)) })
}

// run calls the Go callback f. Its true (stop after this token) is the C callback's
// non-zero return. Neither a panic nor runtime.Goexit may unwind through the library's C++
// frames (a Goexit did: the frames never returned, and the model stayed busy for good). So
// the callback runs on a goroutine of its own, where a panic is recovered and a Goexit ends
// only that goroutine; either stops generation (non-zero return), and Generate raises the
// panic, or calls runtime.Goexit, on its caller's goroutine once the library has returned.
func (state *tokenCallback) run(f func() bool) C.int {
	if state.panicked || state.exited {
		return 1
	}
	var stopHere bool
	finished := make(chan struct{})
	go func() {
		// As golang.org/x/sync/singleflight tells the three apart: a normal return sets
		// normal; a recovered panic (even panic(nil)) reaches the line after the inner
		// function; a Goexit reaches neither.
		normal, recovered := false, false
		defer func() {
			state.exited = !normal && !recovered
			close(finished)
		}()
		func() {
			defer func() {
				if !normal {
					state.panicValue = recover()
				}
			}()
			stopHere = f()
			normal = true
		}()
		if !normal {
			recovered = true
			state.panicked = true
		}
	}()
	<-finished
	if stopHere || state.panicked || state.exited {
		return 1
	}
	return 0
}

// resume raises, on the caller's goroutine once the library has returned, what the callback
// did that could not unwind through the library: its panic, or runtime.Goexit. A nil state
// (no callback) did nothing.
func (state *tokenCallback) resume() {
	if state != nil && state.panicked {
		panic(state.panicValue)
	}
	if state != nil && state.exited {
		runtime.Goexit()
	}
}

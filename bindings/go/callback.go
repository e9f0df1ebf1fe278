package tinymlir

// A file with //export may only declare C in its preamble; the C side of the callback
// (the trampoline tm_generate calls) is in model.go.

/*
#include <stdint.h>
*/
import "C"

import "runtime/cgo"

// tokenCallback is the state behind the cgo.Handle that Generate passes as the C
// callback's user pointer: the Go function, and a panic caught in it.
type tokenCallback struct {
	f          func(token int32) bool
	panicked   bool
	panicValue any
}

// goTokenCallback is called by the library, through tmg_token_trampoline, for each token.
// The Go callback's true (stop after this token) is the C callback's non-zero return. A
// panic must not unwind through the library's C++ frames, so it is caught here, stops
// generation (non-zero return), and Generate raises it again after the C call.
//
//export goTokenCallback
func goTokenCallback(handle C.uintptr_t, token C.int32_t) (stop C.int) {
	state := cgo.Handle(handle).Value().(*tokenCallback)
	if state.panicked {
		return 1
	}
	done := false
	defer func() {
		if !done { // the callback panicked (a flag, since recover() is nil for panic(nil))
			state.panicked, state.panicValue, stop = true, recover(), 1
		}
	}()
	stopHere := state.f(int32(token))
	done = true
	if stopHere {
		return 1
	}
	return 0
}

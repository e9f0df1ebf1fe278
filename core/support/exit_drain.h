// Native code and the end of the process.
//
// exit() runs the library's static destructors (the worker pool joins its threads) and then
// OpenBLAS's, which unmaps its packing buffers, while other threads may still be inside a
// program: a Python daemon thread generating when the interpreter exits crashed in
// sgemm_kernel, at about one exit in thirty. Every program's native code runs between
// EnterNativeCode and LeaveNativeCode (CallGuarded does it); at exit, before anything that
// code uses is torn down, DrainNativeCode refuses new entries and waits for the ones under
// way (computation only: no caller code and no lock the exiting thread holds is inside).
#pragma once

namespace tinymlir {

// Counts this thread in. False once the process exits: the caller runs nothing and reports
// ExitingMessage().
bool EnterNativeCode();
void LeaveNativeCode();

// The message for an entry refused at exit.
const char *ExitingMessage();

// Refuses new entries and waits until no other thread is inside (the calling thread's own
// entries, a handler run inside a program, do not count). Called at exit or unload
// (registered by the first EnterNativeCode, so that it runs before the destructors registered
// earlier: the library's statics, made through ForkSafeOnce, and OpenBLAS's), and by the
// worker pool's destructor, whatever the order. Later calls return at once.
void DrainNativeCode();

}  // namespace tinymlir

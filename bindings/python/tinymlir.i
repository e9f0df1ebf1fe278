/* tinymlir.i: the SWIG interface that makes tinymlir.h and gpt2.h the Python module
 * `tinymlir.capi`.
 *
 * The module mirrors the C API one function for one function. What changes is only how
 * values cross the language boundary:
 * - every tm_status return becomes "None or an exception" (one typemap, below);
 * - output parameters become return values (handles, tm_value, types, statistics, IR text);
 * - shapes, permutations and value lists are Python sequences; tensors are NumPy arrays,
 *   passed as tm_tensor views (element strides) of the arrays' own memory, never copied;
 * - the three model functions that fill buffers of data-dependent size or call back
 *   (tm_tokenize, tm_detokenize, tm_generate, tm_generate_batch) are wrapped by small C helpers that ask the
 *   library for the size and return Python objects.
 * Handles are plain SWIG pointers with no ownership: the package (tinymlir/_handles.py,
 * tinymlir/model.py) wraps each in an object that destroys or releases it exactly once.
 *
 * This file holds the error mapping; the typemaps are in swig/values.i (integers, output
 * parameters), swig/tensors.i (NumPy arrays) and swig/model.i (the model calls). */
%module(package="tinymlir") capi

%{
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinymlir/gpt2.h" /* and, through it, tinymlir.h and version.h */
%}

%init %{
  import_array();
%}

%include <stdint.i>

/* ---- Errors: one mapping from tm_status to the exception hierarchy ------------------ */

%{
/* Sets the Python exception for a failed status. The classes live in tinymlir/_errors.py
 * (one hierarchy, readable Python); the message is the library's or the binding's. */
static void tmpy_set_error(tm_status status, const char *message) {
  PyObject *errors = PyImport_ImportModule("tinymlir._errors");
  if (!errors) return;
  PyObject *text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
  PyObject *exc =
      text ? PyObject_CallMethod(errors, "error_from_status", "iO", (int)status, text) : NULL;
  Py_XDECREF(text);
  Py_DECREF(errors);
  if (!exc) return;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
}

/* The binding's own checks (things the C API cannot see, such as a NumPy dtype it has no
 * tm_dtype for) fail with the same classes, formatted like the library's messages. */
static void tmpy_fail(tm_status status, const char *format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  tmpy_set_error(status, message);
}
%}

/* A helper below may already have set a Python exception (a callback raised, malloc
 * failed): that one wins over the library's last error. */
%typemap(out) tm_status {
  if ($1 != TM_OK) {
    if (!PyErr_Occurred()) tmpy_set_error($1, tm_last_error());
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
}

/* Long-running calls release the GIL so that other Python threads run meanwhile. */
%define TMPY_RELEASE_GIL(function)
%exception function {
  Py_BEGIN_ALLOW_THREADS
  $action
  Py_END_ALLOW_THREADS
}
%enddef
TMPY_RELEASE_GIL(tm_compile)
TMPY_RELEASE_GIL(tm_invoke)
TMPY_RELEASE_GIL(tm_model_load)
TMPY_RELEASE_GIL(tm_model_logits)
TMPY_RELEASE_GIL(tm_model_score)
TMPY_RELEASE_GIL(tm_device_buffer_read)

%include "swig/values.i"
%include "swig/tensors.i"
%include "swig/model.i"
%include "swig/device_buffers.i"

/* Replaced by the helpers of swig/model.i, or of no use from Python (strings the library hands over
 * are freed by the typemaps). */
%ignore tm_tokenize;
%ignore tm_detokenize;
%ignore tm_generate;
%ignore tm_generate_batch;
%ignore tm_batch_sequence;
%ignore tm_free;
%ignore tm_program_ir_text;     /* swig/values.i's helper, which returns a str, is it */
%ignore tm_cache_disk_message;  /* a caller char buffer: not wrapped */
/* The earlier spellings (tinymlir.h's last section): Python has only the current ones. */
%ignore tm_context_destroy;
%ignore tm_cache_stats;
%ignore tm_program_ir;
%ignore tm_kernel_timing;
%ignore tm_kernel_times_get;
%ignore tm_managed_alloc;
%ignore tm_managed_free;
%ignore tm_managed_prefetch;
%ignore tm_token_callback;

/* SWIG does not follow #include: each header is wrapped by name (ops.h, which tinymlir.h
 * includes where its TM_ENUM is defined, first). */
%include "tinymlir/version.h"
#define TM_ENUM(name) enum name
%include "tinymlir/ops.h"
%include "tinymlir/tinymlir.h"
%include "tinymlir/gpt2.h"

/* model.i: token ids, logits, and the helpers for tm_tokenize, tm_detokenize and
 * tm_generate (part of tinymlir.i). */

/* ---- Models ----------------------------------------------------------------------------- */

%{
/* Token ids in: any sequence of ints or integer array, as a C-contiguous int32 array
 * (NumPy refuses unsafe casts, so int64 arrays must be converted by the caller). */
static PyArrayObject *tmpy_ids_in(PyObject *obj) {
  return (PyArrayObject *)PyArray_FROMANY(obj, NPY_INT32, 1, 1, NPY_ARRAY_IN_ARRAY);
}
%}

%typemap(in) (const int32_t *ids, size_t n) (PyArrayObject *ids_array = NULL),
             (const int32_t *prompt, size_t n_prompt) (PyArrayObject *ids_array = NULL) {
  ids_array = tmpy_ids_in($input);
  if (!ids_array) SWIG_fail;
  $1 = (int32_t *)PyArray_DATA(ids_array);
  $2 = (size_t)PyArray_SIZE(ids_array);
}
%typemap(freearg) (const int32_t *ids, size_t n), (const int32_t *prompt, size_t n_prompt) {
  Py_XDECREF(ids_array$argnum);
}

/* tm_model_logits writes vocab_size floats into a caller-owned buffer: a writable,
 * C-contiguous float32 array, passed with its size as the capacity (the library refuses a
 * buffer smaller than the vocabulary). */
%typemap(in) (float *logits, size_t capacity) {
  if (!PyArray_Check($input) || PyArray_TYPE((PyArrayObject *)$input) != NPY_FLOAT32 ||
      !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)$input) ||
      !PyArray_ISWRITEABLE((PyArrayObject *)$input))
    SWIG_exception_fail(SWIG_TypeError,
                        "logits must be a writable, C-contiguous numpy.float32 array");
  $1 = (float *)PyArray_DATA((PyArrayObject *)$input);
  $2 = (size_t)PyArray_SIZE((PyArrayObject *)$input);
}

/* tm_model_score's outputs: None, or a writable, C-contiguous array of the output's dtype,
 * passed with its size as the capacity (the library checks that it is large enough). */
%define TMPY_OPTIONAL_OUT(ctype, name, npy_type, npy_name)
%typemap(in) (ctype *name, size_t name##_capacity) {
  if ($input == Py_None) {
    $1 = NULL;
    $2 = 0;
  } else {
    if (!PyArray_Check($input) || PyArray_TYPE((PyArrayObject *)$input) != npy_type ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)$input) ||
        !PyArray_ISWRITEABLE((PyArrayObject *)$input))
      SWIG_exception_fail(SWIG_TypeError,
                          #name " must be None or a writable, C-contiguous numpy." npy_name " array");
    $1 = (ctype *)PyArray_DATA((PyArrayObject *)$input);
    $2 = (size_t)PyArray_SIZE((PyArrayObject *)$input);
  }
}
%enddef
TMPY_OPTIONAL_OUT(double, logprobs, NPY_FLOAT64, "float64")
TMPY_OPTIONAL_OUT(float, logits, NPY_FLOAT32, "float32")

%{
/* A growable result of the helpers below. */
typedef struct tmpy_buffer {
  void *data;
  size_t n;
} tmpy_buffer;

/* tm_tokenize and tm_detokenize report the size they need, as snprintf does: asked with
 * capacity 0 first, then called with a buffer of exactly that size. */
static tm_status tmpy_tokenize(tm_model *model, const char *text, size_t len, tmpy_buffer *ids) {
  size_t needed = 0;
  tm_status s = tm_tokenize(model, text, len, NULL, 0, &needed);
  if (s != TM_OK) return s;
  int32_t *buf = (int32_t *)malloc(sizeof(int32_t) * (needed > 0 ? needed : 1));
  if (!buf) return PyErr_NoMemory(), TM_ERROR_OUT_OF_MEMORY;
  size_t written = 0;
  s = tm_tokenize(model, text, len, buf, needed, &written);
  if (s != TM_OK) {
    free(buf);
    return s;
  }
  ids->data = buf;
  ids->n = written < needed ? written : needed;
  return TM_OK;
}

static tm_status tmpy_detokenize(tm_model *model, const int32_t *ids, size_t n,
                                 tmpy_buffer *bytes) {
  size_t needed = 0;
  tm_status s = tm_detokenize(model, ids, n, NULL, 0, &needed);
  if (s != TM_OK) return s;
  char *buf = (char *)malloc(needed > 0 ? needed : 1);
  if (!buf) return PyErr_NoMemory(), TM_ERROR_OUT_OF_MEMORY;
  size_t written = 0;
  s = tm_detokenize(model, ids, n, buf, needed, &written);
  if (s != TM_OK) {
    free(buf);
    return s;
  }
  bytes->data = buf;
  bytes->n = written < needed ? written : needed;
  return TM_OK;
}

/* The C trampoline of tm_generate's callback: calls the Python callable with the token
 * (taking the GIL, which tmpy_generate released). A true result stops the generation; an
 * exception stops it too and is kept, to be raised once tm_generate has returned. */
typedef struct tmpy_callback {
  PyObject *callable;
  PyObject *type, *value, *traceback;
} tmpy_callback;

static int tmpy_on_token(void *user, int32_t token) {
  tmpy_callback *cb = (tmpy_callback *)user;
  PyGILState_STATE gil = PyGILState_Ensure();
  int stop = 1;
  PyObject *result = PyObject_CallFunction(cb->callable, "i", (int)token);
  if (result) {
    stop = PyObject_IsTrue(result);
    Py_DECREF(result);
  }
  if (!result || stop < 0) {
    PyErr_Fetch(&cb->type, &cb->value, &cb->traceback);
    stop = 1;
  }
  PyGILState_Release(gil);
  return stop;
}

/* tm_generate with the out_ids buffer sized from max_new_tokens (a generation never makes
 * more) and a Python callable (or None) as the callback. The GIL is released while the
 * model runs. */
static tm_status tmpy_generate(tm_model *model, const int32_t *prompt, size_t n_prompt,
                               const tm_generate_options *options, PyObject *callback,
                               tmpy_buffer *ids) {
  if (callback != Py_None && !PyCallable_Check(callback)) {
    PyErr_SetString(PyExc_TypeError, "tm_generate: callback must be callable or None");
    return TM_ERROR_INVALID_ARGUMENT;
  }
  tm_generate_options defaults;
  tm_generate_options_init(&defaults);
  int32_t max_new = options ? options->max_new_tokens : defaults.max_new_tokens;
  size_t capacity = max_new > 0 ? (size_t)max_new : 0;
  int32_t *buf = (int32_t *)malloc(sizeof(int32_t) * (capacity > 0 ? capacity : 1));
  if (!buf) return PyErr_NoMemory(), TM_ERROR_OUT_OF_MEMORY;
  tmpy_callback cb = {callback, NULL, NULL, NULL};
  size_t n_out = 0;
  tm_status s;
  Py_BEGIN_ALLOW_THREADS
  s = tm_generate(model, prompt, n_prompt, options, callback == Py_None ? NULL : tmpy_on_token,
                  &cb, buf, capacity, &n_out);
  Py_END_ALLOW_THREADS
  if (cb.type) {
    PyErr_Restore(cb.type, cb.value, cb.traceback);
    free(buf);
    return TM_ERROR_RUNTIME;
  }
  if (s != TM_OK) {
    free(buf);
    return s;
  }
  ids->data = buf;
  ids->n = n_out < capacity ? n_out : capacity;
  return TM_OK;
}
%}

%{
/* The C trampoline of tm_generate_batch's callback: the Python callable gets (sequence,
 * token); a true result or an exception ends that sequence (the exception ends the call's
 * Python side: it is kept and raised once tm_generate_batch has returned). */
static int tmpy_on_batch_token(void *user, size_t sequence, int32_t token) {
  tmpy_callback *cb = (tmpy_callback *)user;
  PyGILState_STATE gil = PyGILState_Ensure();
  int stop = 1;
  PyObject *result = cb->type ? NULL
                              : PyObject_CallFunction(cb->callable, "ni", (Py_ssize_t)sequence,
                                                      (int)token);
  if (result) {
    stop = PyObject_IsTrue(result);
    Py_DECREF(result);
  }
  if (!result || stop < 0) {
    if (!cb->type) PyErr_Fetch(&cb->type, &cb->value, &cb->traceback);
    stop = 1;
  }
  PyGILState_Release(gil);
  return stop;
}

/* tm_generate_batch over a list of prompts (int32 arrays, converted by the package), one
 * options struct for every sequence, and `seeds` (None, or an int per sequence, replacing
 * options.seed): *result becomes the list of each sequence's generated ids. The GIL is
 * released while the model runs. */
static tm_status tmpy_generate_batch(tm_model *model, PyObject *prompts,
                                     const tm_generate_options *options, PyObject *seeds,
                                     PyObject *callback, PyObject **result) {
  if (callback != Py_None && !PyCallable_Check(callback)) {
    PyErr_SetString(PyExc_TypeError, "tm_generate_batch: callback must be callable or None");
    return TM_ERROR_INVALID_ARGUMENT;
  }
  if (!PyList_Check(prompts) || (seeds != Py_None && !PyList_Check(seeds))) {
    PyErr_SetString(PyExc_TypeError, "tm_generate_batch: prompts and seeds must be lists");
    return TM_ERROR_INVALID_ARGUMENT;
  }
  const Py_ssize_t n = PyList_GET_SIZE(prompts);
  if (seeds != Py_None && PyList_GET_SIZE(seeds) != n) {
    PyErr_Format(PyExc_ValueError, "tm_generate_batch: %zd seeds for %zd prompts",
                 PyList_GET_SIZE(seeds), n);
    return TM_ERROR_INVALID_ARGUMENT;
  }
  tm_generate_options defaults;
  tm_generate_options_init(&defaults);
  if (!options) options = &defaults;
  const size_t capacity = options->max_new_tokens > 0 ? (size_t)options->max_new_tokens : 0;
  PyArrayObject **arrays = (PyArrayObject **)calloc((size_t)n + 1, sizeof *arrays);
  tm_generate_options *each = (tm_generate_options *)calloc((size_t)n + 1, sizeof *each);
  tm_batch_sequence *batch = (tm_batch_sequence *)calloc((size_t)n + 1, sizeof *batch);
  int32_t *out = (int32_t *)calloc((size_t)n * capacity + 1, sizeof *out);
  tm_status s = TM_OK;
  if (!arrays || !each || !batch || !out) {
    PyErr_NoMemory();
    s = TM_ERROR_OUT_OF_MEMORY;
  }
  for (Py_ssize_t i = 0; s == TM_OK && i < n; ++i) {
    arrays[i] = tmpy_ids_in(PyList_GET_ITEM(prompts, i));
    each[i] = *options;
    if (arrays[i] && seeds != Py_None)
      each[i].seed = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(seeds, i));
    if (!arrays[i] || PyErr_Occurred()) {
      s = TM_ERROR_INVALID_ARGUMENT;
      break;
    }
    batch[i].prompt = (const int32_t *)PyArray_DATA(arrays[i]);
    batch[i].n_prompt = (size_t)PyArray_SIZE(arrays[i]);
    batch[i].options = &each[i];
    batch[i].out_ids = capacity > 0 ? out + (size_t)i * capacity : NULL;
    batch[i].capacity = capacity;
  }
  tmpy_callback cb = {callback, NULL, NULL, NULL};
  if (s == TM_OK) {
    Py_BEGIN_ALLOW_THREADS
    s = tm_generate_batch(model, batch, (size_t)n,
                          callback == Py_None ? NULL : tmpy_on_batch_token, &cb);
    Py_END_ALLOW_THREADS
  }
  if (cb.type) {
    PyErr_Restore(cb.type, cb.value, cb.traceback);
    s = TM_ERROR_RUNTIME;
  }
  if (s == TM_OK) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; ++i) {
      const size_t made = batch[i].n_out < capacity ? batch[i].n_out : capacity;
      PyObject *ids = PyList_New((Py_ssize_t)made);
      for (size_t j = 0; ids && j < made; ++j)
        PyList_SET_ITEM(ids, (Py_ssize_t)j, PyLong_FromLong(batch[i].out_ids[j]));
      if (!ids) {
        Py_CLEAR(list);
        break;
      }
      PyList_SET_ITEM(list, i, ids);
    }
    if (!list) s = TM_ERROR_OUT_OF_MEMORY;
    *result = list;
  }
  for (Py_ssize_t i = 0; arrays && i < n; ++i) Py_XDECREF(arrays[i]);
  free(arrays);
  free(each);
  free(batch);
  free(out);
  return s;
}
%}

%typemap(in, numinputs=0) PyObject **result (PyObject *temp = NULL) { $1 = &temp; }
%typemap(argout) PyObject **result { $result = SWIG_Python_AppendOutput($result, *$1); }

/* Helper results: ids as a list of ints, bytes as bytes. */
%typemap(in, numinputs=0) tmpy_buffer *ids (tmpy_buffer buffer = {NULL, 0}),
                          tmpy_buffer *bytes (tmpy_buffer buffer = {NULL, 0}) {
  $1 = &buffer;
}
%typemap(argout) tmpy_buffer *ids {
  PyObject *list = PyList_New((Py_ssize_t)$1->n);
  for (size_t i = 0; list && i < $1->n; ++i)
    PyList_SET_ITEM(list, (Py_ssize_t)i, PyLong_FromLong(((int32_t *)$1->data)[i]));
  $result = SWIG_Python_AppendOutput($result, list);
}
%typemap(argout) tmpy_buffer *bytes {
  $result = SWIG_Python_AppendOutput(
      $result, PyBytes_FromStringAndSize((const char *)$1->data, (Py_ssize_t)$1->n));
}
%typemap(freearg) tmpy_buffer *ids, tmpy_buffer *bytes {
  if ($1) free($1->data);
}

/* text of tm_tokenize: str (encoded as UTF-8 here) or bytes (passed as they are; the
 * library rejects invalid UTF-8). */
%typemap(in) (const char *text, size_t len) (PyObject *utf8 = NULL) {
  if (PyUnicode_Check($input)) {
    utf8 = PyUnicode_AsUTF8String($input);
    if (!utf8) SWIG_fail;
  } else if (PyBytes_Check($input)) {
    utf8 = $input;
    Py_INCREF(utf8);
  } else {
    SWIG_exception_fail(SWIG_TypeError, "text must be str or bytes");
  }
  $1 = PyBytes_AS_STRING(utf8);
  $2 = (size_t)PyBytes_GET_SIZE(utf8);
}
%typemap(freearg) (const char *text, size_t len) { Py_XDECREF(utf8$argnum); }

%rename(tm_tokenize) tmpy_tokenize;
%rename(tm_detokenize) tmpy_detokenize;
%rename(tm_generate) tmpy_generate;
%rename(tm_generate_batch) tmpy_generate_batch;
tm_status tmpy_tokenize(tm_model *model, const char *text, size_t len, tmpy_buffer *ids);
tm_status tmpy_detokenize(tm_model *model, const int32_t *ids, size_t n, tmpy_buffer *bytes);
tm_status tmpy_generate(tm_model *model, const int32_t *prompt, size_t n_prompt,
                        const tm_generate_options *options, PyObject *callback,
                        tmpy_buffer *ids);
tm_status tmpy_generate_batch(tm_model *model, PyObject *prompts,
                              const tm_generate_options *options, PyObject *seeds,
                              PyObject *callback, PyObject **result);

/* values.i: integers, shapes and value lists in; output parameters out (part of
 * tinymlir.i). */

/* ---- Strings ---------------------------------------------------------------------------- */

/* Names and file names (tm_trace_begin's name, tm_program_export/load's path,
 * tm_cache_set_dir's and tm_model_load's dir, tm_set_last_error's message): a str, passed as
 * UTF-8, or None for NULL. A C string ends at its first NUL, so a str holding one would name
 * another file (export to "d/victim\0.tmp" wrote d/victim): ValueError, as open() gives.
 * The package's wrappers (tinymlir/_handles.py) also take bytes and os.PathLike. */
%typemap(in) const char *name, const char *dir, const char *path, const char *message {
  if ($input == Py_None) {
    $1 = NULL;
  } else {
    Py_ssize_t size = 0;
    const char *utf8 = PyUnicode_Check($input) ? PyUnicode_AsUTF8AndSize($input, &size) : NULL;
    if (!PyUnicode_Check($input)) {
      PyErr_Format(PyExc_TypeError, "$symname: $1_name must be a str or None, not %s",
                   Py_TYPE($input)->tp_name);
      SWIG_fail;
    }
    if (!utf8) SWIG_fail;
    if ((size_t)size != strlen(utf8)) {
      PyErr_SetString(PyExc_ValueError, "$symname: embedded null byte in $1_name");
      SWIG_fail;
    }
    $1 = (char *)utf8;
  }
}

/* ---- Sequences of integers ------------------------------------------------------------ */

%{
/* Copies a Python sequence of ints into a new int64 array (at least one element, so it is
 * never NULL). Returns 0 with a Python exception set on failure. */
static int tmpy_int64s(PyObject *obj, const char *what, int64_t **out, Py_ssize_t *len) {
  PyObject *seq = PySequence_Fast(obj, "expected a sequence of ints");
  if (!seq) return 0;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  int64_t *values = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  if (!values) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return 0;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *item = PyNumber_Index(PySequence_Fast_GET_ITEM(seq, i));
    long long v = item ? PyLong_AsLongLong(item) : -1;
    Py_XDECREF(item);
    if (PyErr_Occurred()) {
      PyErr_Format(PyExc_TypeError, "%s[%zd] must be an int that fits in 64 bits", what, i);
      free(values);
      Py_DECREF(seq);
      return 0;
    }
    values[i] = (int64_t)v;
  }
  Py_DECREF(seq);
  *out = values;
  *len = n;
  return 1;
}

/* The same for int32 (permutations) and uint32 (tm_value lists), range-checked. */
static int tmpy_int32s(PyObject *obj, const char *what, int64_t lo, int64_t hi, void **out,
                       Py_ssize_t *len) {
  int64_t *wide = NULL;
  if (!tmpy_int64s(obj, what, &wide, len)) return 0;
  int32_t *narrow = (int32_t *)malloc(sizeof(int32_t) * (size_t)(*len > 0 ? *len : 1));
  if (!narrow) {
    free(wide);
    PyErr_NoMemory();
    return 0;
  }
  for (Py_ssize_t i = 0; i < *len; ++i) {
    if (wide[i] < lo || wide[i] > hi) {
      PyErr_Format(PyExc_OverflowError, "%s[%zd] = %lld is outside %lld..%lld", what, i,
                   (long long)wide[i], (long long)lo, (long long)hi);
      free(wide);
      free(narrow);
      return 0;
    }
    narrow[i] = (int32_t)wide[i];
  }
  free(wide);
  *out = narrow;
  return 1;
}

%}

/* (rank, shape) of tm_op_input and tm_op_reshape: one Python sequence. */
%typemap(in) (int32_t rank, const int64_t *shape) (Py_ssize_t len = 0) {
  int64_t *dims = NULL;
  if (!tmpy_int64s($input, "shape", &dims, &len)) SWIG_fail;
  if (len > INT32_MAX) {
    free(dims);
    SWIG_exception_fail(SWIG_OverflowError, "shape is too long");
  }
  $1 = (int32_t)len;
  $2 = dims;
}
%typemap(freearg) (int32_t rank, const int64_t *shape) { free((void *)$2); }

/* (perm, n_perm) of tm_op_transpose: a sequence, or None for "reverse the axes" (NULL, 0).
 * The length goes to the library, which checks it against x's rank. */
%typemap(in) (const int32_t *perm, int32_t n_perm) (Py_ssize_t len = 0) {
  void *values = NULL;
  if ($input != Py_None && !tmpy_int32s($input, "perm", INT32_MIN, INT32_MAX, &values, &len))
    SWIG_fail;
  if (len > INT32_MAX) {
    free(values);
    SWIG_exception_fail(SWIG_OverflowError, "perm is too long");
  }
  $1 = (int32_t *)values;
  $2 = (int32_t)len;
}
%typemap(freearg) (const int32_t *perm, int32_t n_perm) { free((void *)$1); }

/* (rank, begin) and end of tm_op_slice: two sequences. The C call has one count for both
 * arrays, so they must be equally long (else the library would read past the shorter);
 * the count itself is the library's to check against x's rank. */
%typemap(in) (int32_t rank, const int64_t *begin) (Py_ssize_t len = 0) {
  int64_t *values = NULL;
  if (!tmpy_int64s($input, "begin", &values, &len)) SWIG_fail;
  if (len > INT32_MAX) {
    free(values);
    SWIG_exception_fail(SWIG_OverflowError, "begin is too long");
  }
  $1 = (int32_t)len;
  $2 = values;
}
%typemap(freearg) (int32_t rank, const int64_t *begin) { free((void *)$2); }
%typemap(in) const int64_t *end (Py_ssize_t len = 0) {
  int64_t *values = NULL;
  if (!tmpy_int64s($input, "end", &values, &len)) SWIG_fail;
  $1 = values;
}
%typemap(check) const int64_t *end {
  /* arg3: the count of tm_op_slice(trace, x, rank, begin, end, out), begin's length. */
  if (len$argnum != (Py_ssize_t)arg3) {
    tmpy_fail(TM_ERROR_INVALID_ARGUMENT, "tm_op_slice: begin has %d entries, end has %zd",
              (int)arg3, len$argnum);
    SWIG_fail;
  }
}
%typemap(freearg) const int64_t *end { free((void *)$1); }

/* Lists of values: tm_trace_end's outputs and tm_op_concat's operands. */
%typemap(in) (const tm_value *outputs, int32_t n_outputs) (Py_ssize_t len = 0),
             (const tm_value *xs, int32_t n) (Py_ssize_t len = 0) {
  void *values = NULL;
  if (!tmpy_int32s($input, "$1_name", 0, UINT32_MAX, &values, &len)) SWIG_fail;
  if (len > INT32_MAX) {
    free(values);
    SWIG_exception_fail(SWIG_OverflowError, "too many values");
  }
  $1 = (tm_value *)values;
  $2 = (int32_t)len;
}
%typemap(freearg) (const tm_value *outputs, int32_t n_outputs), (const tm_value *xs, int32_t n) {
  free((void *)$1);
}

/* tm_op's values and integer attributes: two sequences (the library checks their counts
 * against the op's signature). */
%typemap(in) (const tm_value *operands, int32_t n_operands) (Py_ssize_t len = 0) {
  void *values = NULL;
  if (!tmpy_int32s($input, "operands", 0, UINT32_MAX, &values, &len)) SWIG_fail;
  if (len > INT32_MAX) {
    free(values);
    SWIG_exception_fail(SWIG_OverflowError, "too many operands");
  }
  $1 = (tm_value *)values;
  $2 = (int32_t)len;
}
%typemap(freearg) (const tm_value *operands, int32_t n_operands) { free((void *)$1); }
%typemap(in) (const int64_t *ints, int32_t n_ints) (Py_ssize_t len = 0) {
  int64_t *values = NULL;
  if (!tmpy_int64s($input, "ints", &values, &len)) SWIG_fail;
  if (len > INT32_MAX) {
    free(values);
    SWIG_exception_fail(SWIG_OverflowError, "too many ints");
  }
  $1 = values;
  $2 = (int32_t)len;
}
%typemap(freearg) (const int64_t *ints, int32_t n_ints) { free((void *)$1); }

/* ---- Output parameters become return values ------------------------------------------- */

%define TMPY_HANDLE_OUT(TYPE)
%typemap(in, numinputs=0) TYPE **out (TYPE *handle = NULL) { $1 = &handle; }
%typemap(argout) TYPE **out {
  $result = SWIG_Python_AppendOutput($result, SWIG_NewPointerObj(SWIG_as_voidptr(*$1),
                                                                 $*1_descriptor, 0));
}
%enddef
TMPY_HANDLE_OUT(tm_context)
TMPY_HANDLE_OUT(tm_trace)
TMPY_HANDLE_OUT(tm_program)
TMPY_HANDLE_OUT(tm_model)

%typemap(in, numinputs=0) tm_value *out (tm_value value = 0) { $1 = &value; }
%typemap(argout) tm_value *out {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromUnsignedLong(*$1));
}

/* tm_value_type, tm_program_input_type/output_type: (dtype, shape tuple). */
%typemap(in, numinputs=0) (tm_dtype *dtype, int32_t *rank, int64_t *shape)
    (tm_dtype dtype = TM_F32, int32_t rank = 0, int64_t dims[TM_MAX_RANK]) {
  $1 = &dtype;
  $2 = &rank;
  $3 = dims;
}
%typemap(argout) (tm_dtype *dtype, int32_t *rank, int64_t *shape) {
  PyObject *shape = PyTuple_New(*$2);
  for (int32_t i = 0; i < *$2; ++i) PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong($3[i]));
  $result = SWIG_Python_AppendOutput($result, Py_BuildValue("(iN)", (int)*$1, shape));
}

/* tm_cache_stats: (hits, misses, entries). */
%typemap(in, numinputs=0) (uint64_t *hits, uint64_t *misses, uint64_t *entries)
    (uint64_t h = 0, uint64_t m = 0, uint64_t e = 0) {
  $1 = &h;
  $2 = &m;
  $3 = &e;
}
%typemap(argout) (uint64_t *hits, uint64_t *misses, uint64_t *entries) {
  $result = SWIG_Python_AppendOutput(
      $result, Py_BuildValue("(KKK)", (unsigned long long)*$1, (unsigned long long)*$2,
                             (unsigned long long)*$3));
}

/* tm_model_info: (vocab_size, n_ctx, n_layer, n_embd). */
%typemap(in, numinputs=0) (int32_t *vocab_size, int32_t *n_ctx, int32_t *n_layer, int32_t *n_embd)
    (int32_t v = 0, int32_t c = 0, int32_t l = 0, int32_t e = 0) {
  $1 = &v;
  $2 = &c;
  $3 = &l;
  $4 = &e;
}
%typemap(argout) (int32_t *vocab_size, int32_t *n_ctx, int32_t *n_layer, int32_t *n_embd) {
  $result = SWIG_Python_AppendOutput($result, Py_BuildValue("(iiii)", *$1, *$2, *$3, *$4));
}

/* tm_program_ir_text: the text as str. The library fills a buffer of ours, snprintf-style:
 * asked for the size first, then for the text. */
%{
static tm_status tmpy_program_ir_text(tm_program *program, tm_stage stage, char **ir_text) {
  size_t n = 0;
  tm_status s = tm_program_ir_text(program, stage, NULL, 0, &n);
  if (s != TM_OK) return s;
  char *buf = (char *)malloc(n + 1);
  if (!buf) return PyErr_NoMemory(), TM_ERROR_OUT_OF_MEMORY;
  s = tm_program_ir_text(program, stage, buf, n + 1, &n);
  if (s != TM_OK) {
    free(buf);
    return s;
  }
  *ir_text = buf;
  return TM_OK;
}
%}
%typemap(in, numinputs=0) char **ir_text (char *text = NULL) { $1 = &text; }
%typemap(argout) char **ir_text {
  PyObject *s = PyUnicode_DecodeUTF8(*$1, (Py_ssize_t)strlen(*$1), "replace");
  free(*$1);
  *$1 = NULL;
  $result = SWIG_Python_AppendOutput($result, s);
}
%typemap(freearg) char **ir_text { free(*$1); }
%rename(tm_program_ir_text) tmpy_program_ir_text;
tm_status tmpy_program_ir_text(tm_program *program, tm_stage stage, char **ir_text);

/* tm_cache_get_info: a new tm_cache_info object with struct_size filled in here. */
%typemap(in, numinputs=0) tm_cache_info *info (tm_cache_info info) {
  memset(&info, 0, sizeof info);
  info.struct_size = (uint32_t)sizeof info;
  $1 = &info;
}
%typemap(argout) tm_cache_info *info {
  tm_cache_info *copy = (tm_cache_info *)malloc(sizeof *copy);
  if (!copy) SWIG_exception_fail(SWIG_MemoryError, "out of memory");
  *copy = *$1;
  $result = SWIG_Python_AppendOutput($result,
                                     SWIG_NewPointerObj(copy, $1_descriptor, SWIG_POINTER_OWN));
}

/* tm_model_get_stats: a new tm_model_stats object with struct_size filled in here, since
 * Python cannot know sizeof. */
%typemap(in, numinputs=0) tm_model_stats *stats (tm_model_stats stats) {
  memset(&stats, 0, sizeof stats);
  stats.struct_size = (uint32_t)sizeof stats;
  $1 = &stats;
}
%typemap(argout) tm_model_stats *stats {
  tm_model_stats *copy = (tm_model_stats *)malloc(sizeof *copy);
  if (!copy) SWIG_exception_fail(SWIG_MemoryError, "out of memory");
  *copy = *$1;
  $result = SWIG_Python_AppendOutput($result,
                                     SWIG_NewPointerObj(copy, $1_descriptor, SWIG_POINTER_OWN));
}

/* tm_target_get_device_counters: a new tm_device_counters object, struct_size filled in here. */
%typemap(in, numinputs=0) tm_device_counters *counters (tm_device_counters counters) {
  memset(&counters, 0, sizeof counters);
  counters.struct_size = (uint32_t)sizeof counters;
  $1 = &counters;
}
%typemap(argout) tm_device_counters *counters {
  tm_device_counters *copy = (tm_device_counters *)malloc(sizeof *copy);
  if (!copy) SWIG_exception_fail(SWIG_MemoryError, "out of memory");
  *copy = *$1;
  $result = SWIG_Python_AppendOutput($result,
                                     SWIG_NewPointerObj(copy, $1_descriptor, SWIG_POINTER_OWN));
}

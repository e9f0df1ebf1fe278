/* tensors.i: NumPy arrays as tm_tensor views (part of tinymlir.i). */

/* ---- Tensors: NumPy arrays as tm_tensor views ------------------------------------------- */

%{
/* The tm_tensor array of one call. `arrays` (a PySequence_Fast) keeps the NumPy arrays
 * alive and unchanged in identity for the duration of the call; shapes and element strides
 * are stored in `dims`. */
typedef struct tmpy_tensors {
  PyObject *arrays;
  tm_tensor *tensors;
  int64_t *dims;
  int32_t n;
} tmpy_tensors;

static void tmpy_tensors_free(tmpy_tensors *t) {
  Py_XDECREF(t->arrays);
  free(t->tensors);
  free(t->dims);
  memset(t, 0, sizeof *t);
}

/* The tm_dtype of a NumPy dtype: float16/32/64, int32/64 and bool, in native byte order
 * (NumPy has no bfloat16: TM_BF16 tensors cannot come from arrays). */
static int tmpy_dtype(PyArray_Descr *descr, tm_dtype *out) {
  if (PyArray_ISNBO(descr->byteorder) || descr->byteorder == '|') {
    if (descr->kind == 'f' && descr->elsize == 2) return *out = TM_F16, 1;
    if (descr->kind == 'f' && descr->elsize == 4) return *out = TM_F32, 1;
    if (descr->kind == 'f' && descr->elsize == 8) return *out = TM_F64, 1;
    if (descr->kind == 'i' && descr->elsize == 4) return *out = TM_I32, 1;
    if (descr->kind == 'i' && descr->elsize == 8) return *out = TM_I64, 1;
    if (descr->kind == 'b' && descr->elsize == 1) return *out = TM_BOOL, 1;
  }
  return 0;
}

/* Fills t from a sequence of NumPy arrays (or one array when `single`). Outputs must be
 * writable. Strides go over as element counts; C-contiguous arrays pass NULL strides. */
static int tmpy_tensors_from(PyObject *obj, int single, int writable, const char *fn,
                             const char *what, tmpy_tensors *t) {
  memset(t, 0, sizeof *t);
  t->arrays = single ? PyTuple_Pack(1, obj)
                     : PySequence_Fast(obj, "expected a sequence of numpy.ndarray");
  if (!t->arrays) return 0;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(t->arrays), total = 0;
  if (n > INT32_MAX) {
    PyErr_SetString(PyExc_OverflowError, "too many tensors");
    return 0;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *a = PySequence_Fast_GET_ITEM(t->arrays, i);
    if (!PyArray_Check(a)) {
      PyErr_Format(PyExc_TypeError, "%s: %s %zd is a %s, expected a numpy.ndarray", fn, what,
                   i, Py_TYPE(a)->tp_name);
      return 0;
    }
    total += 2 * PyArray_NDIM((PyArrayObject *)a);
  }
  t->n = (int32_t)n;
  t->tensors = (tm_tensor *)calloc((size_t)(n > 0 ? n : 1), sizeof(tm_tensor));
  t->dims = (int64_t *)calloc((size_t)(total > 0 ? total : 1), sizeof(int64_t));
  if (!t->tensors || !t->dims) {
    PyErr_NoMemory();
    return 0;
  }
  int64_t *dims = t->dims;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyArrayObject *a = (PyArrayObject *)PySequence_Fast_GET_ITEM(t->arrays, i);
    tm_tensor *tensor = &t->tensors[i];
    if (!tmpy_dtype(PyArray_DESCR(a), &tensor->dtype)) {
      PyObject *name = PyObject_Str((PyObject *)PyArray_DESCR(a));
      tmpy_fail(TM_ERROR_DTYPE,
                "%s: %s %zd has dtype %s, which tinymlir does not support (float16, float32, "
                "float64, int32, int64 and bool, in native byte order)",
                fn, what, i, name ? PyUnicode_AsUTF8(name) : "?");
      Py_XDECREF(name);
      return 0;
    }
    if (writable && !PyArray_ISWRITEABLE(a)) {
      tmpy_fail(TM_ERROR_INVALID_ARGUMENT, "%s: %s %zd is read-only", fn, what, i);
      return 0;
    }
    if (!PyArray_ISALIGNED(a)) {
      tmpy_fail(TM_ERROR_INVALID_ARGUMENT, "%s: %s %zd is not aligned to its element size",
                fn, what, i);
      return 0;
    }
    int ndim = PyArray_NDIM(a);
    npy_intp item = PyArray_ITEMSIZE(a);
    tensor->data = PyArray_DATA(a);
    tensor->rank = ndim;
    tensor->shape = dims;
    for (int d = 0; d < ndim; ++d) dims[d] = PyArray_DIM(a, d);
    dims += ndim;
    tensor->strides = NULL;
    if (!PyArray_IS_C_CONTIGUOUS(a)) {
      for (int d = 0; d < ndim; ++d) {
        if (PyArray_STRIDE(a, d) % item != 0) {
          tmpy_fail(TM_ERROR_INVALID_ARGUMENT,
                    "%s: %s %zd has a byte stride (%zd) that is not a multiple of its "
                    "element size (%zd)",
                    fn, what, i, (Py_ssize_t)PyArray_STRIDE(a, d), (Py_ssize_t)item);
          return 0;
        }
        dims[d] = PyArray_STRIDE(a, d) / item;
      }
      tensor->strides = dims;
    }
    dims += ndim;
  }
  return 1;
}
%}

%typemap(in) const tm_tensor *data (tmpy_tensors store = {0}) {
  if (!tmpy_tensors_from($input, 1, 0, "tm_op_constant", "data", &store)) SWIG_fail;
  $1 = store.tensors;
}
%typemap(freearg) const tm_tensor *data { tmpy_tensors_free(&store$argnum); }

%typemap(in) (const tm_tensor *inputs, int32_t n_inputs) (tmpy_tensors store = {0}) {
  if (!tmpy_tensors_from($input, 0, 0, "tm_invoke", "input", &store)) SWIG_fail;
  $1 = store.tensors;
  $2 = store.n;
}
%typemap(in) (const tm_tensor *outputs, int32_t n_outputs) (tmpy_tensors store = {0}) {
  if (!tmpy_tensors_from($input, 0, 1, "tm_invoke", "output", &store)) SWIG_fail;
  $1 = store.tensors;
  $2 = store.n;
}
%typemap(freearg) (const tm_tensor *inputs, int32_t n_inputs),
                  (const tm_tensor *outputs, int32_t n_outputs) {
  tmpy_tensors_free(&store$argnum);
}

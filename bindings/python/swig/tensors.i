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

/* A tinymlir.DeviceTensor's (address, dtype, shape), from its _tm_tensor attribute: the
 * shape as a new tuple reference, or NULL with an exception set. */
static PyObject *tmpy_device_tensor_shape(PyObject *obj) {
  PyObject *triple = PyObject_GetAttrString(obj, "_tm_tensor");
  if (!triple) return NULL;
  if (!PyTuple_Check(triple) || PyTuple_GET_SIZE(triple) != 3 ||
      !PyTuple_Check(PyTuple_GET_ITEM(triple, 2))) {
    Py_DECREF(triple);
    PyErr_SetString(PyExc_TypeError, "_tm_tensor must be (address, dtype, shape tuple)");
    return NULL;
  }
  PyObject *shape = PyTuple_GET_ITEM(triple, 2);
  Py_INCREF(shape);
  Py_DECREF(triple);
  return shape;
}

/* Fills *tensor (contiguous) from a DeviceTensor's _tm_tensor, its shape into dims. */
static int tmpy_device_tensor(PyObject *obj, tm_tensor *tensor, int64_t *dims) {
  PyObject *triple = PyObject_GetAttrString(obj, "_tm_tensor");
  if (!triple) return 0;
  PyObject *shape = PyTuple_GET_ITEM(triple, 2);
  const unsigned long long address = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(triple, 0));
  const long dtype = PyLong_AsLong(PyTuple_GET_ITEM(triple, 1));
  const Py_ssize_t rank = PyTuple_GET_SIZE(shape);
  for (Py_ssize_t d = 0; d < rank; ++d) dims[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
  Py_DECREF(triple);
  if (PyErr_Occurred()) return 0;
  tensor->data = (void *)(uintptr_t)address;
  tensor->dtype = (tm_dtype)dtype;
  tensor->rank = (int32_t)rank;
  tensor->shape = dims;
  tensor->strides = NULL;
  return 1;
}

/* Fills t from a sequence of NumPy arrays and tinymlir.DeviceTensors (or one array when
 * `single`): a DeviceTensor is its buffer's memory, contiguous. Outputs must be writable.
 * Strides go over as element counts; C-contiguous arrays pass NULL strides. */
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
    if (PyObject_HasAttrString(a, "_tm_tensor")) {  /* a tinymlir.DeviceTensor */
      PyObject *shape = tmpy_device_tensor_shape(a);
      if (!shape) return 0;
      total += PyTuple_GET_SIZE(shape);
      Py_DECREF(shape);
      continue;
    }
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
    PyObject *obj = PySequence_Fast_GET_ITEM(t->arrays, i);
    tm_tensor *tensor = &t->tensors[i];
    if (PyObject_HasAttrString(obj, "_tm_tensor")) {
      if (!tmpy_device_tensor(obj, tensor, dims)) return 0;
      dims += tensor->rank;
      continue;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
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

/* device_buffers.i: tm_device_buffer_* (part of tinymlir.i). Bytes cross as any object with
 * the buffer protocol (a NumPy array, bytes, bytearray); a buffer's address, for tensors,
 * is an int (tmpy_device_buffer_address). */

TMPY_HANDLE_OUT(tm_device_buffer)

%{
static uintptr_t tmpy_device_buffer_address(const tm_device_buffer *buffer) {
  return (uintptr_t)tm_device_buffer_data(buffer);
}
%}
uintptr_t tmpy_device_buffer_address(const tm_device_buffer *buffer);
%ignore tm_device_buffer_data;

/* Host bytes in: a C-contiguous buffer, read as bytes. */
%typemap(in) (const void *src, size_t bytes) (Py_buffer view, int got = 0) {
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
  got = 1;
  $1 = view.buf;
  $2 = (size_t)view.len;
}
%typemap(freearg) (const void *src, size_t bytes) {
  if (got$argnum) PyBuffer_Release(&view$argnum);
}
/* Host bytes out: a writable C-contiguous buffer, filled whole. */
%typemap(in) (void *dst, size_t bytes) (Py_buffer view, int got = 0) {
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
  got = 1;
  $1 = view.buf;
  $2 = (size_t)view.len;
}
%typemap(freearg) (void *dst, size_t bytes) {
  if (got$argnum) PyBuffer_Release(&view$argnum);
}

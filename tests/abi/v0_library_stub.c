/* What a 0.x application was linked against: a library named libtinymlir.so.0, here with
 * the symbols old_app.c calls (their signatures do not matter: the application never runs
 * against this stub, since the test gives the loader only the current library's folder). */
#define STUB(name) \
  void name(void) {}
STUB(tm_context_create)
STUB(tm_context_destroy)
STUB(tm_trace_begin)
STUB(tm_trace_end)
STUB(tm_trace_destroy)
STUB(tm_op_input)
STUB(tm_op_add)
STUB(tm_compile_options_init)
STUB(tm_compile)
STUB(tm_program_release)
STUB(tm_model_options_init)
STUB(tm_model_load)
STUB(tm_model_destroy)

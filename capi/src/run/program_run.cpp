// Running compiled programs: the tm_program_* accessors, tm_invoke, and program files
// (tm_program_export, tm_program_load). Built into both libtinymlir.so and
// libtinymlir_runtime.so, which has no LLVM.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "capi/src/run/assembly.h"
#include "capi/src/run/errors.h"
#include "capi/src/run/program_handle.h"
#include "core/engine/program_loader.h"
#include "core/engine/targets.h"

using tm_capi::Fail;
using tm_capi::Guard;

namespace {

// The text of `stage`. A CPU program keeps no assembly (the engine links its object);
// PrintAssembly (assembly.h) prints it where the library has a compiler.
tinymlir::Status StageText(tinymlir::Program &program, tm_stage stage, std::string *out) {
  tinymlir::Status status = program.StageText(tm_capi::ToCore(stage), out);
  if (!status.ok() && stage == TM_STAGE_ASSEMBLY)
    return tm_capi::PrintAssembly(program, status, out);
  return status;
}

tm_status TypeOf(const tm_program *p, int32_t i, bool input, tm_dtype *dtype, int32_t *rank,
                 int64_t *shape) {
  const char *fn = input ? "tm_program_input_type" : "tm_program_output_type";
  if (!p) return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": program is NULL");
  const auto &types = input ? p->impl->inputs : p->impl->outputs;
  if (i < 0 || i >= static_cast<int32_t>(types.size()))
    return Fail(TM_ERROR_OUT_OF_RANGE, std::string(fn) + ": index " + std::to_string(i) +
                                           " is out of range: the program has " +
                                           std::to_string(types.size()) +
                                           (input ? " inputs" : " outputs"));
  const tinymlir::TensorType &t = types[i];
  if (dtype) *dtype = tm_capi::ToC(t.dtype);
  if (rank) *rank = t.rank();
  if (shape) std::copy(t.shape.begin(), t.shape.end(), shape);
  return TM_OK;
}

tm_status ManagedAlloc(const char *fn, size_t bytes, void **out) {
  if (!out) return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": out is NULL");
  *out = nullptr;
  // Through the GPU target's device, which makes room from the blocks its program calls
  // left idle for each other.
  return Guard(fn, [&] { return tinymlir::AllocateOnDevice(tinymlir::TargetKind::kGpu, bytes, out); });
}

tm_status ManagedPrefetch(const char *fn, const void *block, size_t bytes) {
  if (!block && bytes > 0)
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                std::string(fn) + ": block is NULL but bytes is " + std::to_string(bytes));
  return Guard(fn, [&] { return tinymlir::PrefetchOnDevice(tinymlir::TargetKind::kGpu, block, bytes); });
}

tm_status KernelTimes(const char *fn, tm_kernel_times *times) {
  const tinymlir::KernelTimeTotals k = tinymlir::ReadKernelTimeTotals();
  tm_kernel_times current;
  current.gemv_calls = k.gemv_calls;
  current.gemv_seconds = k.gemv_seconds;
  current.blas_calls = k.blas_calls;
  current.blas_seconds = k.blas_seconds;
  current.pool_waits = k.pool_waits;
  current.pool_wait_seconds = k.pool_wait_seconds;
  return tm_capi::Report(tinymlir::WriteVersionedStruct(fn, "times", current,
                                                        TM_KERNEL_TIMES_SIZE_V1, times));
}

}  // namespace

extern "C" {

static_assert(TM_NUM_COMPILE_PHASES == tinymlir::kNumCompilePhases,
              "tm_compile_phase and tinymlir::CompilePhase must list the same phases");

TM_API double tm_program_phase_seconds(const tm_program *program, tm_compile_phase phase) {
  const int index = static_cast<int>(phase);
  if (!program || !program->impl || index < 0 || index >= tinymlir::kNumCompilePhases) return -1.0;
  return program->impl->phase_seconds[index];
}

TM_API int32_t tm_program_from_disk_cache(const tm_program *program) {
  return program && program->impl && program->impl->read_from_disk ? 1 : 0;
}

TM_API int32_t tm_program_cache_hit(const tm_program *program) {
  return program && program->cache_hit ? 1 : 0;
}

TM_API uint64_t tm_program_temporary_bytes(const tm_program *program) {
  return program ? program->impl->temporary_bytes : 0;
}

TM_API void tm_program_retain(tm_program *program) {
  if (program) program->refs.fetch_add(1, std::memory_order_relaxed);
}

TM_API void tm_program_release(tm_program *program) {
  if (program && program->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete program;
}

TM_API int32_t tm_program_num_inputs(const tm_program *program) {
  return program ? static_cast<int32_t>(program->impl->inputs.size()) : 0;
}

TM_API int32_t tm_program_num_outputs(const tm_program *program) {
  return program ? static_cast<int32_t>(program->impl->outputs.size()) : 0;
}

TM_API tm_status tm_program_input_type(const tm_program *program, int32_t i, tm_dtype *dtype,
                                       int32_t *rank, int64_t *shape) {
  return TypeOf(program, i, true, dtype, rank, shape);
}

TM_API tm_status tm_program_output_type(const tm_program *program, int32_t i, tm_dtype *dtype,
                                        int32_t *rank, int64_t *shape) {
  return TypeOf(program, i, false, dtype, rank, shape);
}

TM_API tm_status tm_program_ir_text(tm_program *program, tm_stage stage, char *buf,
                                    size_t capacity, size_t *len) {
  if (!program) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_ir_text: program is NULL");
  if (tm_status s = tm_capi::Report(
          tm_capi::CheckTextBuffer("tm_program_ir_text", buf, capacity, len));
      s != TM_OK)
    return s;
  return Guard("tm_program_ir_text", [&] {
    std::string text;
    TM_RETURN_IF_ERROR(StageText(*program->impl, stage, &text));
    tm_capi::CopyText(text, buf, capacity, len);
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_program_ir(tm_program *program, tm_stage stage, char **text) {
  if (!program) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_ir: program is NULL");
  if (!text) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_ir: text is NULL");
  return Guard("tm_program_ir", [&] {
    std::string s;
    TM_RETURN_IF_ERROR(StageText(*program->impl, stage, &s));
    char *copy = static_cast<char *>(std::malloc(s.size() + 1));
    if (!copy) return tinymlir::OutOfMemory("cannot allocate the stage text");
    std::memcpy(copy, s.c_str(), s.size() + 1);
    *text = copy;
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_invoke(tm_program *program, const tm_tensor *inputs, int32_t n_inputs,
                           const tm_tensor *outputs, int32_t n_outputs) {
  if (!program) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_invoke: program is NULL");
  if ((n_inputs > 0 && !inputs) || (n_outputs > 0 && !outputs))
    return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_invoke: NULL tensor array");
  if (n_inputs < 0 || n_outputs < 0)
    return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_invoke: negative tensor count");
  return Guard("tm_invoke", [&] {
    // The counts first: a caller's arrays are read only as far as the program's own.
    TM_RETURN_IF_ERROR(program->impl->CheckCounts(n_inputs, n_outputs));
    // Most programs take a handful of tensors: convert on the stack.
    constexpr int kOnStack = 32;
    tinymlir::TensorView stack[kOnStack];
    std::vector<tinymlir::TensorView> heap;
    tinymlir::TensorView *views = stack;
    const int total = n_inputs + n_outputs;
    if (total > kOnStack) {
      heap.resize(total);
      views = heap.data();
    }
    for (int i = 0; i < n_inputs; ++i) views[i] = tm_capi::ToCore(inputs[i]);
    for (int i = 0; i < n_outputs; ++i) views[n_inputs + i] = tm_capi::ToCore(outputs[i]);
    return program->impl->Invoke(views, n_inputs, views + n_inputs, n_outputs);
  });
}

TM_API tm_status tm_program_export(const tm_program *program, const char *path) {
  if (!program) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_export: program is NULL");
  if (!path) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_export: path is NULL");
  return Guard("tm_program_export",
               [&] { return tinymlir::WriteProgramFile(*program->impl, path); });
}

TM_API tm_status tm_program_load(const char *path, tm_program **out) {
  if (!path) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_load: path is NULL");
  if (!out) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_load: out is NULL");
  return Guard("tm_program_load", [&] {
    std::unique_ptr<tinymlir::Program> program;
    TM_RETURN_IF_ERROR(tinymlir::ReadProgramFile(path, &program));
    auto handle = std::make_unique<tm_program>();
    handle->impl = std::move(program);
    *out = handle.release();
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_process_managed_alloc(size_t bytes, void **out) {
  return ManagedAlloc("tm_process_managed_alloc", bytes, out);
}

TM_API void tm_process_managed_free(void *block) {
  tinymlir::FreeOnDevice(tinymlir::TargetKind::kGpu, block);
}

TM_API tm_status tm_process_managed_prefetch(const void *block, size_t bytes) {
  return ManagedPrefetch("tm_process_managed_prefetch", block, bytes);
}

TM_API void tm_process_kernel_timing(int32_t enable) { tinymlir::EnableKernelTiming(enable != 0); }

TM_API tm_status tm_process_kernel_times(tm_kernel_times *times) {
  return KernelTimes("tm_process_kernel_times", times);
}

// The earlier spellings (tinymlir.h's last section).
TM_API tm_status tm_managed_alloc(size_t bytes, void **out) {
  return ManagedAlloc("tm_managed_alloc", bytes, out);
}
TM_API void tm_managed_free(void *block) { tm_process_managed_free(block); }
TM_API tm_status tm_managed_prefetch(const void *block, size_t bytes) {
  return ManagedPrefetch("tm_managed_prefetch", block, bytes);
}
TM_API void tm_kernel_timing(int32_t enable) { tm_process_kernel_timing(enable); }
TM_API tm_status tm_kernel_times_get(tm_kernel_times *times) {
  return KernelTimes("tm_kernel_times_get", times);
}

}  // extern "C"

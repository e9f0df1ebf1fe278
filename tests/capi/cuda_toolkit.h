// What GPU tests need of the CUDA toolkit, found where tinymlir and MLIR look for it (the
// same rules as tests/cuda_toolkit.sh): the toolkit is $CUDA_HOME, else $CUDA_PATH, else
// /usr/local/cuda (core/targets/gpu/compile/gpu_lowering.cpp); libdevice (the math functions of GPU
// kernels) is <toolkit>/nvvm/libdevice/libdevice.10.bc; ptxas (cubin, and the tests' check of
// the PTX) is <toolkit>/bin/ptxas, else the first on PATH, else $CUDA_ROOT/bin/ptxas (MLIR's
// order). Debian's archive has no CUDA toolkit: a test that needs a part of it skips, naming
// what is missing (GTEST_SKIP() << MissingCudaToolkit(...)).
#ifndef TINYMLIR_TESTS_CAPI_CUDA_TOOLKIT_H_
#define TINYMLIR_TESTS_CAPI_CUDA_TOOLKIT_H_

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

namespace tmtest {

inline std::string CudaToolkitDir() {
  for (const char *name : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *dir = std::getenv(name); dir && *dir) return dir;
  return "/usr/local/cuda";
}

// The ptxas tinymlir would run for cubin; "" when there is none.
inline std::string FindPtxas() {
  const std::string in_toolkit = CudaToolkitDir() + "/bin/ptxas";
  if (access(in_toolkit.c_str(), X_OK) == 0) return in_toolkit;
  if (const char *path = std::getenv("PATH")) {
    std::string dirs = path;
    for (size_t start = 0; start <= dirs.size();) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      const std::string dir = dirs.substr(start, end - start);
      const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/ptxas";
      struct stat st;
      if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          access(candidate.c_str(), X_OK) == 0)
        return candidate;
      start = end + 1;
    }
  }
  if (const char *root = std::getenv("CUDA_ROOT"); root && *root) {
    const std::string in_root = std::string(root) + "/bin/ptxas";
    if (access(in_root.c_str(), X_OK) == 0) return in_root;
  }
  return "";
}

inline std::string LibdevicePath() {
  return CudaToolkitDir() + "/nvvm/libdevice/libdevice.10.bc";
}

enum class CudaToolkitPart { kPtxas, kLibdevice };

// Why the parts are missing ("no ptxas: ...; no libdevice: ..."); "" when all are there.
inline std::string MissingCudaToolkit(std::initializer_list<CudaToolkitPart> parts) {
  std::string why;
  for (CudaToolkitPart part : parts) {
    std::string reason;
    if (part == CudaToolkitPart::kPtxas && FindPtxas().empty())
      reason = "no ptxas: neither " + CudaToolkitDir() +
               "/bin/ptxas (the CUDA toolkit: $CUDA_HOME, $CUDA_PATH or /usr/local/cuda) nor "
               "PATH has it";
    if (part == CudaToolkitPart::kLibdevice && access(LibdevicePath().c_str(), R_OK) != 0)
      reason = "no libdevice: " + LibdevicePath() +
               " is missing (the CUDA toolkit: $CUDA_HOME, $CUDA_PATH or /usr/local/cuda)";
    if (!reason.empty()) why += (why.empty() ? "" : "; ") + reason;
  }
  return why;
}

}  // namespace tmtest

// For a test whose GPU kernels call math functions (tanh, exp, sqrt: CUDA's libdevice):
// without libdevice the compile is refused naming it (tests/cli/gpu_without_toolkit.sh checks
// that), so the test cannot run and is skipped, saying what is missing.
#define TM_SKIP_WITHOUT_LIBDEVICE()                                                         \
  do {                                                                                      \
    const std::string tm_missing_ =                                                         \
        ::tmtest::MissingCudaToolkit({::tmtest::CudaToolkitPart::kLibdevice});             \
    if (!tm_missing_.empty()) GTEST_SKIP() << tm_missing_ << " (the kernels call its math)"; \
  } while (0)

#endif  // TINYMLIR_TESTS_CAPI_CUDA_TOOLKIT_H_

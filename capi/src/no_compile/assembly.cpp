// libtinymlir_runtime.so has no code generator: a CPU program's assembly, which it does not
// keep, cannot be printed there.
#include "capi/src/run/assembly.h"

namespace tm_capi {

tinymlir::Status PrintAssembly(tinymlir::Program &, const tinymlir::Status &not_kept,
                               std::string *) {
  return not_kept;
}

}  // namespace tm_capi

// Where a model's programs come from: the compiler, through a context and its caches (in
// libtinymlir.so), or a bundle of exported programs (in both libraries). The model asks for
// programs by key and never knows which; libtinymlir_runtime.so links the bundle alone, so
// the GPT-2 application runs there without LLVM.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpt2/src/checkpoint.h"
#include "gpt2/src/programs.h"
#include "gpt2/src/status.h"
#include "tinymlir/gpt2.h"
#include "tinymlir/tinymlir.hpp"

namespace tinymlir::gpt2 {

class ProgramSource {
 public:
  virtual ~ProgramSource() = default;

  // Makes the programs of `keys` (distinct): (*out)[i] is keys[i]'s. Adds where each came
  // from (compiled, memory cache, disk cache, bundle) and the compile phases to *stats, and
  // reports progress (ready, total) as programs become ready.
  virtual Status Make(const std::vector<ProgramKey> &keys, tm_progress_callback progress,
                      void *user, std::vector<ProgramHandle> *out, tm_model_stats *stats) = 0;

  // Whether programs come from a bundle (a bundle is not compiled into another one).
  virtual bool is_bundle() const = 0;
  // Whether Make can make the program of `key` (a bundle has only what it was compiled
  // with; a bundle made before head_argmax existed has none).
  virtual bool Has(const ProgramKey &) const { return true; }

  // Where the programs run (a bundle's manifest says).
  virtual tm_target target() const = 0;
};

// The compiler over ctx's caches, for `target`; keeps a reference to ctx. In
// libtinymlir_runtime.so (gpt2/src/no_compile/no_compiler.cpp) it fails with TM_ERROR_UNSUPPORTED.
Status NewCompilerSource(tm_context *ctx, const Gpt2Config &config, tm_target target,
                         std::unique_ptr<ProgramSource> *out);

// What the bundle in `dir` was compiled for (its manifest says): its target (a GPU request
// for a CPU bundle is an error; the default, the CPU, takes the bundle's), and, when
// *weights is 0 (the caller did not choose: "as the checkpoint stores them"), the dtype its
// weight matrices are held in, so that a bundle compiled with --weights f16 loads without
// the caller repeating the choice. An explicit *weights is left for OpenBundle to check.
Status BundleChoices(const std::string &dir, tm_target *target, tm_dtype *weights);

// The programs of the bundle in `dir`, once its manifest matches `config` (dimensions and
// the weight matrices' dtype).
Status OpenBundle(const std::string &dir, const Gpt2Config &config,
                  std::unique_ptr<ProgramSource> *out);

// Creates the folder `dir` for a bundle, or checks that an existing one is a folder this
// process may write to: called before compiling, so that a bad path fails at once rather
// than after every program has been compiled.
Status PrepareBundleFolder(const std::string &dir);

// Exports programs[key] for each of `keys` into `dir` (PrepareBundleFolder's), with the
// manifest OpenBundle checks (and the target the programs run on).
Status WriteBundle(const std::string &dir, const Gpt2Config &config, tm_target target,
                   const std::vector<ProgramKey> &keys,
                   const std::map<ProgramKey, ProgramHandle> &programs);

}  // namespace tinymlir::gpt2

// Prepared weights: a model's tensors exactly as it holds them (matrices in the chosen
// dtype, projections transposed for the CPU's kernels), written once to a file beside the
// compile cache and read straight into the model's memory at every later load of the same
// checkpoint with the same choices: no parsing, conversion or transposition, a read at the
// page cache's speed. (GPT-2 124M: 690-750 ms to convert, about 100 ms to read back.)
//
// The file's name is a hash of what it depends on; inside, a readable key repeats it: the
// checkpoint's path, size, modification time and a hash of its safetensors header, a hash
// of config.json, the matrix dtype, the layout, and this format's version. A file whose key
// differs from the checkpoint's now is stale; one whose tensors fail their checksums, or
// whose structure is not the config's, is corrupt. Either way it is never used: the
// checkpoint is converted again and the file rewritten, and the model's load report says
// why. Tensors are read into huge-page memory (weight_memory.h), in parallel.
#pragma once

#include <string>
#include <string_view>

#include "gpt2/src/checkpoint.h"
#include "gpt2/src/status.h"

namespace tinymlir::gpt2 {

class SafetensorsFile;

// What a prepared file is for: the checkpoint (its files as they are now) and the choices
// the model made (config.matrices, config.projections_out_major).
struct PreparedKey {
  std::string text;  // the readable key, compared whole
  std::string path;  // the file, in <cache folder>/weights; "" when there is no cache folder
};

// The key of the model in `dir` as `config` holds it: model.safetensors as it was opened
// (`file`: its size, modification time and header) and config.json's text as it was parsed
// (`config_text`). Both come from the reads the weights and the config were built from, so
// a checkpoint replaced during a load cannot lend its key to the weights of the one read.
// `why_none` says why there is no path (no cache folder, a folder refused).
PreparedKey KeyFor(const std::string &dir, const SafetensorsFile &file, const Gpt2Config &config,
                   std::string_view config_text, std::string *why_none);

// Reads the prepared weights of `key` into *weights, checked against `config`. Returns
// false, with *why, when there is none to use (none yet, stale, corrupt: a corrupt or stale
// file is removed); I/O and memory failures other than a bad file are a Status.
Status ReadPreparedWeights(const PreparedKey &key, const Gpt2Config &config,
                           Gpt2Weights *weights, bool *used, std::string *why);

// Writes `weights` as the prepared file of `key` (a temporary file renamed into place, so a
// reader never sees half of one). A failure is returned for the load report; the model
// works without the file.
Status WritePreparedWeights(const PreparedKey &key, const Gpt2Weights &weights);

}  // namespace tinymlir::gpt2

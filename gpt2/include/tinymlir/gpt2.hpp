// gpt2.hpp — the C++ convenience layer (<tinymlir/tinymlir.hpp>) for GPT-2 models
// (<tinymlir/gpt2.h>): the model's RAII handle. It adds no behaviour.
#ifndef TINYMLIR_GPT2_HPP
#define TINYMLIR_GPT2_HPP

#include "tinymlir/gpt2.h"
#include "tinymlir/tinymlir.hpp"

namespace tinymlir {

using ModelHandle = Handle<tm_model, tm_model_destroy>;

}  // namespace tinymlir

#endif  // TINYMLIR_GPT2_HPP

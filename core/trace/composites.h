// Composite ops expanded into primitives at trace time, so that elementwise fusion sees
// every step (softmax's exponentials feed both the sum and the division, which limits
// fusion, and that is visible in the IR).
#pragma once

#include "core/trace/trace.h"

namespace tinymlir {

Status ReduceMean(Trace &g, const char *op, ValueId x, int32_t axis, bool keepdims,
                  ValueId *out);
Status ReduceVar(Trace &g, const char *op, ValueId x, int32_t axis, bool keepdims,
                 ValueId *out);
Status Softmax(Trace &g, const char *op, ValueId x, int32_t axis, ValueId *out);
Status LayerNorm(Trace &g, const char *op, ValueId x, ValueId gamma, ValueId beta, double eps,
                 ValueId *out);
Status GeluTanh(Trace &g, const char *op, ValueId x, ValueId *out);

}  // namespace tinymlir

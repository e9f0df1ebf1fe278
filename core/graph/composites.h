// Composite ops expanded into primitives at trace time, so that elementwise fusion sees
// every step (the seed chapter's point: softmax's exponentials feed both the sum and the
// division, which limits fusion, and that is visible in the IR).
#pragma once

#include "core/graph/graph.h"

namespace tinymlir {

Status ReduceMean(Graph &g, const char *op, ValueId x, int32_t axis, bool keepdims,
                  ValueId *out);
Status ReduceVar(Graph &g, const char *op, ValueId x, int32_t axis, bool keepdims,
                 ValueId *out);
Status Softmax(Graph &g, const char *op, ValueId x, int32_t axis, ValueId *out);
Status LayerNorm(Graph &g, const char *op, ValueId x, ValueId gamma, ValueId beta, double eps,
                 ValueId *out);
Status GeluTanh(Graph &g, const char *op, ValueId x, ValueId *out);

}  // namespace tinymlir

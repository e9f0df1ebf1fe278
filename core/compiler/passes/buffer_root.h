// The buffer a memref value is a view of, through every view (subview, cast, reshape, and
// memref.transpose, which is not a ViewLikeOpInterface): what the GPU passes compare to
// tell whether two memrefs may share memory.
#pragma once

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace tinymlir {

inline mlir::Value BufferRoot(mlir::Value memref) {
  while (true) {
    if (auto view = memref.getDefiningOp<mlir::ViewLikeOpInterface>())
      memref = view.getViewSource();
    else if (auto transpose = memref.getDefiningOp<mlir::memref::TransposeOp>())
      memref = transpose.getIn();
    else
      return memref;
  }
}

}  // namespace tinymlir

// Captures MLIR diagnostics into a string for the caller's error message, so nothing is
// printed to stderr behind the caller's back.
#pragma once

#include <string>

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

namespace tinymlir {

class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext *ctx)
      : handler_(ctx, [this](mlir::Diagnostic &d) {
          Append(d);
          return mlir::success();
        }) {}

  // The collected messages ("error: ... (note: ...)"), cleared.
  std::string Take() {
    std::string s = text_.empty() ? "no diagnostic was emitted" : text_;
    text_.clear();
    return s;
  }

 private:
  void Append(mlir::Diagnostic &d) {
    if (!text_.empty()) text_ += "; ";
    switch (d.getSeverity()) {
      case mlir::DiagnosticSeverity::Error: text_ += "error: "; break;
      case mlir::DiagnosticSeverity::Warning: text_ += "warning: "; break;
      case mlir::DiagnosticSeverity::Note: text_ += "note: "; break;
      case mlir::DiagnosticSeverity::Remark: text_ += "remark: "; break;
    }
    text_ += d.str();
    for (mlir::Diagnostic &note : d.getNotes()) text_ += " (note: " + note.str() + ")";
  }

  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

}  // namespace tinymlir

// tinymlir-opt (tools/tinymlir-opt): runs passes by name on a .mlir file, as mlir-opt does,
// with tinymlir's own passes and target rewrites among them. Reached through the compiler
// library's entry points (core/engine/compiler_interface.h).
#pragma once

namespace tinymlir {

int OptMain(int argc, char **argv);

}  // namespace tinymlir

// tinymlir-opt: mlir-opt with tinymlir's passes (core/compiler/opt_main.cpp), for the
// FileCheck tests of tests/passes. The compiler library exports one symbol, its entry
// points; the tool links the library and calls through them.
#include "core/engine/compiler_interface.h"

extern "C" const tinymlir::CompilerEntryPoints *tm_compiler_entry_points();

int main(int argc, char **argv) { return tm_compiler_entry_points()->opt_main(argc, argv); }

// The one symbol libtinymlir_compiler.so exports (core/compiler/compiler.map): its entry
// points, for core/driver/compiler_library.cpp in libtinymlir.so.
#include "core/support/build_id.h"
#include "core/compiler/codegen/native_object.h"
#include "core/compiler/native_compiler.h"
#include "core/contract/compiler_interface.h"

#ifndef TINYMLIR_VERSION_STRING
#error "TINYMLIR_VERSION_STRING must be defined by the build"
#endif

extern "C" __attribute__((visibility("default"))) const tinymlir::CompilerEntryPoints *
tm_compiler_entry_points() {
  static const tinymlir::CompilerEntryPoints entry = {
      tinymlir::kCompilerAbi,
      TINYMLIR_VERSION_STRING,
      tinymlir::LibraryBuildId().c_str(),  // this library's own: build_id.cpp is linked in
      sizeof(tinymlir::Trace),
      sizeof(tinymlir::CompiledProgram),
      sizeof(tinymlir::CompileOptions),
      sizeof(tinymlir::Status),
      &tinymlir::CompileNative,
      &tinymlir::AssemblyFromLlvmIr,
  };
  return &entry;
}

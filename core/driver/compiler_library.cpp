#include "core/driver/compiler_library.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#ifndef TINYMLIR_VERSION_STRING
#error "TINYMLIR_VERSION_STRING must be defined by the build"
#endif
#ifndef TINYMLIR_COMPILER_FILE
#error "TINYMLIR_COMPILER_FILE must be defined by the build"
#endif

#include "core/support/fork_safe_once.h"

namespace tinymlir {
namespace {

Status Check(const CompilerEntryPoints *entry) {
  if (!entry) return Unsupported(std::string(kCompilerEntryName) + " returned nothing");
  if (entry->abi != kCompilerAbi || std::string(entry->version) != TINYMLIR_VERSION_STRING)
    return Unsupported("it is from tinymlir " + std::string(entry->version) + " (compiler ABI " +
                       std::to_string(entry->abi) + "); this is tinymlir " +
                       TINYMLIR_VERSION_STRING + " (compiler ABI " +
                       std::to_string(kCompilerAbi) + ")");
  if (entry->trace_size != sizeof(Trace) || entry->program_size != sizeof(CompiledProgram) ||
      entry->options_size != sizeof(CompileOptions) || entry->status_size != sizeof(Status))
    return Unsupported("it was built from other sources than this library (its types differ)");
  if (std::string(entry->build_id) != kCompilerBuildId)
    return Unsupported("it is not the compiler library this libtinymlir was built with (its "
                       "build ID is " + std::string(entry->build_id) + ", expected " +
                       kCompilerBuildId + ")");
  return Status::Ok();
}

}  // namespace

static ForkSafeOnce<std::string> library_folder;

const std::string &LibraryFolder() {
  return library_folder.Get([] {
    std::string found = ".";
    Dl_info self;
    if (dladdr(reinterpret_cast<void *>(&LoadCompiler), &self) && self.dli_fname &&
        *self.dli_fname) {
      char resolved[PATH_MAX];
      const std::string file = realpath(self.dli_fname, resolved) ? resolved : self.dli_fname;
      const size_t slash = file.rfind('/');
      if (slash != std::string::npos) found = file.substr(0, slash == 0 ? 1 : slash);
    }
    return found + (found.back() == '/' ? "" : "/");
  });
}

// Resolved as the library loads: the loader's name for it may be relative to the working
// directory of that moment (LD_LIBRARY_PATH=lib), which the caller may change before its
// first compile.
[[maybe_unused]] static const std::string &library_folder_at_load = LibraryFolder();

static ForkSafeOnce<std::string> compiler_library_path;

const std::string &CompilerLibraryPath() {
  return compiler_library_path.Get([] { return LibraryFolder() + TINYMLIR_COMPILER_FILE; });
}

Status LoadCompilerLibrary(const std::string &path, const CompilerEntryPoints **out) {
  auto fail = [&path](const std::string &why) {
    return Status(StatusCode::kUnsupported,
                  "cannot load the compiler library " + path + ": " + why +
                      " (programs from program files and the disk cache need no compiler)");
  };
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *error = dlerror();
    std::string why = error ? error : "dlopen failed";
    if (why.compare(0, path.size() + 2, path + ": ") == 0) why.erase(0, path.size() + 2);
    // Out of address space (ulimit -v): the compiler is there but cannot be mapped, which
    // is not a build without one. (glibc says "failed to map segment" for any mapping that
    // fails, a noexec mount too: only a set limit makes it this.)
    struct rlimit space;
    const bool limited = getrlimit(RLIMIT_AS, &space) == 0 && space.rlim_cur != RLIM_INFINITY;
    if ((limited && why.find("failed to map segment") != std::string::npos) ||
        why.find(std::strerror(ENOMEM)) != std::string::npos)
      return OutOfMemory("cannot load the compiler library " + path + ": " + why +
                         " (an address-space limit, ulimit -v?)");
    return fail(why);
  }
  using EntryFunction = const CompilerEntryPoints *(*)();
  auto get = reinterpret_cast<EntryFunction>(dlsym(library, kCompilerEntryName));
  const CompilerEntryPoints *candidate = get ? get() : nullptr;
  Status status =
      get ? Check(candidate) : Unsupported(std::string("it has no ") + kCompilerEntryName);
  if (!status.ok()) {
    dlclose(library);
    return fail(status.message());
  }
  *out = candidate;
  return Status::Ok();
}

// The compiler library, loaded once, or why it could not be.
struct LoadedCompiler {
  const CompilerEntryPoints *entry = nullptr;
  Status failure;
};
static ForkSafeOnce<LoadedCompiler> loaded_compiler;

Status LoadCompiler(const CompilerEntryPoints **out) {
  const LoadedCompiler &loaded = loaded_compiler.Get([] {
    LoadedCompiler made;
    made.failure = LoadCompilerLibrary(CompilerLibraryPath(), &made.entry);
    return made;
  });
  if (!loaded.failure.ok()) return loaded.failure;
  *out = loaded.entry;
  return Status::Ok();
}

}  // namespace tinymlir

// Names for generated code in Linux perf. perf shows code that no file on disk describes as
// bare addresses in "[JIT] tid N" unless the process lists it in /tmp/perf-PID.map, one
// "START SIZE NAME" line per function (hexadecimal start and size): the convention of
// perf's own JIT support, which V8, LuaJIT and LLVM's JIT also follow.
//
// With TINYMLIR_PERF_MAP=1, every program the engine links (compiled, read from the disk
// cache or from a program file) has its functions appended there as
// tinymlir:<trace name>:<function> (kernel, __tm_loop_nest_N, tm_packed_entry, ...), so
// `perf record` / `perf report` name the loop nests of each program. Lines are never
// removed: perf reads the file after the process ends, and an unloaded program's lines
// only name addresses nothing else uses until they are mapped again.
//
// A profiling aid, never a reason for a load to fail: a map that cannot be written is
// skipped, silently (the variable is opt-in; nothing is printed behind the caller's back).
#pragma once

#include <string>

namespace tinymlir {

class ElfImage;

// Appends image's functions to this process's perf map under `program_name`, when
// TINYMLIR_PERF_MAP is 1; otherwise does nothing.
void AddToPerfMap(const std::string &program_name, const ElfImage &image);

}  // namespace tinymlir

// Program files (tm_program_export / tm_program_load): a loaded program runs the exported
// native code through tinymlir's own ELF linker and gives bit-identical results; bad files
// are refused with a message naming what is wrong.
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "test_util.h"

namespace tmtest {
namespace {

std::string TempPath(const std::string &name) {
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/tinymlir-program-file-test-" +
         std::to_string(getpid()) + "-" + name;
}

// One program and its inputs: `build` records the ops on inputs of `in_shapes` (f32, or
// i32 where `int_inputs` says), returning the outputs.
struct Case {
  const char *name;
  std::vector<std::vector<int64_t>> in_shapes;
  std::vector<bool> int_inputs;
  std::function<std::vector<tm_value>(tm_trace *, const std::vector<tm_value> &)> build;
};

std::vector<Case> Cases() {
  return {
      {"blas_matmul_tanh_bias", {{8, 16}, {16, 12}, {12}}, {false, false, false},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{
             Op(tm_op_add, t, Op(tm_op_tanh, t, Op(tm_op_matmul, t, v[0], v[1])), v[2])};
       }},
      {"gemv_worker_pool", {{1, 512}, {512, 512}}, {false, false},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_matmul, t, v[0], v[1])};
       }},
      {"transpose_matmul_softmax", {{6, 5}, {6, 7}}, {false, false},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         tm_value at = Op(tm_op_transpose, t, v[0], static_cast<const int32_t *>(nullptr), 0);
         return std::vector<tm_value>{Op(tm_op_softmax, t, Op(tm_op_matmul, t, at, v[1]), -1)};
       }},
      {"gather_layer_norm_gelu", {{9, 8}, {4}, {8}, {8}}, {false, true, false, false},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         tm_value rows = Op(tm_op_gather, t, v[0], v[1]);
         tm_value normed = Op(tm_op_layer_norm, t, rows, v[2], v[3], 1e-5);
         return std::vector<tm_value>{Op(tm_op_gelu_tanh, t, normed),
                                      Op(tm_op_reduce_sum, t, rows, 0, 0)};
       }},
      {"strided_slice_concat", {{4, 6}, {4, 6}}, {false, false},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         const int64_t b[] = {1, 2}, e[] = {4, 5};
         tm_value s = Op(tm_op_slice, t, v[0], 2, b, e);
         tm_value u = Op(tm_op_slice, t, v[1], 2, b, e);
         const tm_value both[] = {s, u};
         return std::vector<tm_value>{Op(tm_op_concat, t, both, 2, 1),
                                      Op(tm_op_exp, t, Op(tm_op_mul, t, s, u))};
       }},
  };
}

struct Run {
  std::vector<std::vector<float>> outputs;
};

// Invokes `p` on deterministic inputs for `c`; the outputs' shapes come from the program.
Run Invoke(tm_program *p, const Case &c) {
  std::vector<std::vector<float>> fin;
  std::vector<std::vector<int32_t>> iin;
  std::vector<tm_tensor> ins;
  fin.reserve(c.in_shapes.size());
  iin.reserve(c.in_shapes.size());
  for (size_t i = 0; i < c.in_shapes.size(); ++i) {
    const int64_t n = NumElements(c.in_shapes[i]);
    if (c.int_inputs[i]) {
      iin.emplace_back();
      for (int64_t k = 0; k < n; ++k) iin.back().push_back(static_cast<int32_t>((k * 5 + 2) % 9));
      ins.push_back({iin.back().data(), TM_I32, static_cast<int32_t>(c.in_shapes[i].size()),
                     c.in_shapes[i].data(), nullptr});
    } else {
      fin.push_back(Cast<float>(Pseudo(static_cast<size_t>(n), -1.0, 1.0, 17 + i)));
      ins.push_back({fin.back().data(), TM_F32, static_cast<int32_t>(c.in_shapes[i].size()),
                     c.in_shapes[i].data(), nullptr});
    }
  }
  Run run;
  const int32_t n_out = tm_program_num_outputs(p);
  std::vector<std::vector<int64_t>> shapes(n_out, std::vector<int64_t>(TM_MAX_RANK));
  std::vector<tm_tensor> outs;
  run.outputs.resize(n_out);
  for (int32_t o = 0; o < n_out; ++o) {
    int32_t rank = 0;
    tm_dtype dtype;
    EXPECT_EQ(tm_program_output_type(p, o, &dtype, &rank, shapes[o].data()), TM_OK);
    shapes[o].resize(rank);
    run.outputs[o].assign(NumElements(shapes[o]), -7.0f);
    outs.push_back({run.outputs[o].data(), TM_F32, rank, shapes[o].data(), nullptr});
  }
  EXPECT_EQ(tm_invoke(p, ins.data(), static_cast<int32_t>(ins.size()), outs.data(), n_out), TM_OK)
      << c.name << ": " << tm_last_error();
  return run;
}

TEST(ProgramFile, ALoadedProgramGivesTheJitsResultsBitForBit) {
  Context ctx = NewContext();
  for (const Case &c : Cases()) {
    SCOPED_TRACE(c.name);
    Trace t = NewTrace(ctx, c.name);
    std::vector<tm_value> in;
    for (size_t i = 0; i < c.in_shapes.size(); ++i)
      in.push_back(Input(t, c.int_inputs[i] ? TM_I32 : TM_F32, c.in_shapes[i]));
    End(t, c.build(t, in));
    Program jit;
    TM_ASSERT_OK(tm_compile(ctx, t, nullptr, jit.out()));
    const std::string path = TempPath(std::string(c.name) + ".tmp");
    TM_ASSERT_OK(tm_program_export(jit, path.c_str()));
    Program loaded;
    TM_ASSERT_OK(tm_program_load(path.c_str(), loaded.out()));
    std::remove(path.c_str());

    EXPECT_EQ(tm_program_num_inputs(loaded), tm_program_num_inputs(jit));
    EXPECT_EQ(tm_program_num_outputs(loaded), tm_program_num_outputs(jit));
    EXPECT_EQ(tm_program_temporary_bytes(loaded), tm_program_temporary_bytes(jit));
    EXPECT_EQ(StageText(loaded, TM_STAGE_LLVM_IR), StageText(jit, TM_STAGE_LLVM_IR));
    EXPECT_EQ(StageText(loaded, TM_STAGE_OPTIMIZED), StageText(jit, TM_STAGE_OPTIMIZED));
    // libtinymlir.so prints a loaded program's assembly from its LLVM IR: the same text.
    EXPECT_EQ(StageText(loaded, TM_STAGE_ASSEMBLY), StageText(jit, TM_STAGE_ASSEMBLY));
    EXPECT_EQ(Invoke(loaded, c).outputs, Invoke(jit, c).outputs);
  }
}

TEST(ProgramFile, GatherIndicesAreStillChecked) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx, "gather");
  tm_value table = Input(t, TM_F32, {3, 2}), idx = Input(t, TM_I32, {2});
  End(t, {Op(tm_op_gather, t, table, idx)});
  Program jit;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, jit.out()));
  const std::string path = TempPath("gather.tmp");
  TM_ASSERT_OK(tm_program_export(jit, path.c_str()));
  Program loaded;
  TM_ASSERT_OK(tm_program_load(path.c_str(), loaded.out()));
  std::remove(path.c_str());
  Host<float> tab({3, 2}, 1.0f), out({2, 2}, 0.0f);
  Host<int32_t> bad({2}, {0, 3});
  TM_EXPECT_STATUS(tm_invoke(loaded, std::vector<tm_tensor>{tab.view(), bad.view()}.data(), 2,
                             std::vector<tm_tensor>{out.view()}.data(), 1),
                   TM_ERROR_OUT_OF_RANGE);
}

// The parts of a program file, to forge variants (the format of core/engine/program_file.h).
struct Parts {
  std::string manifest, key, payload;
};

bool Split(const std::string &bytes, Parts *p) {
  size_t pos = 8;
  auto text = [&](std::string *out) {
    uint64_t n;
    if (bytes.size() < pos + 8) return false;
    std::memcpy(&n, bytes.data() + pos, 8);
    pos += 8;
    if (n > bytes.size() - pos) return false;
    *out = bytes.substr(pos, n);
    pos += n;
    return true;
  };
  return text(&p->manifest) && text(&p->key) && text(&p->payload) && pos + 8 == bytes.size();
}

std::string Join(const std::string &magic, const Parts &p) {
  std::string s = magic;
  for (const std::string *t : {&p.manifest, &p.key, &p.payload}) {
    uint64_t n = t->size();
    s.append(reinterpret_cast<const char *>(&n), 8);
    s += *t;
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  s.append(reinterpret_cast<const char *>(&h), 8);
  return s;
}

// exp(x) for x f32[4]: the small program these tests export.
Program CompileSmallExp(tm_context *ctx) {
  Trace t = NewTrace(ctx, "small");
  tm_value x = Input(t, TM_F32, {4});
  End(t, {Op(tm_op_exp, t, x)});
  Program jit;
  EXPECT_EQ(tm_compile(ctx, t, nullptr, jit.out()), TM_OK) << tm_last_error();
  return jit;
}

TEST(ProgramFile, BadFilesAreRefusedWithAReason) {
  Context ctx = NewContext();
  Program jit = CompileSmallExp(ctx);
  ASSERT_NE(jit.get(), nullptr);
  const std::string path = TempPath("small.tmp");
  TM_ASSERT_OK(tm_program_export(jit, path.c_str()));
  const std::string good = ReadFile(path);
  Parts parts;
  ASSERT_TRUE(Split(good, &parts));
  ASSERT_EQ(Join(good.substr(0, 8), parts), good) << "the test's reading of the format";

  auto expect_refused = [&](const std::string &bytes, tm_status status, const char *words) {
    WriteFile(path, bytes);
    tm_program *p = reinterpret_cast<tm_program *>(0x1);
    TM_EXPECT_STATUS(tm_program_load(path.c_str(), &p), status);
    EXPECT_EQ(p, reinterpret_cast<tm_program *>(0x1)) << "written on failure";
    EXPECT_NE(std::string(tm_last_error()).find(words), std::string::npos) << tm_last_error();
  };
  expect_refused(good.substr(0, good.size() - 9), TM_ERROR_IO, "checksum");
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  expect_refused(flipped, TM_ERROR_IO, "checksum");
  expect_refused("#!/bin/sh\necho not a program\n", TM_ERROR_IO, "not a tinymlir program file");
  expect_refused("", TM_ERROR_IO, "not a tinymlir program file");

  Parts other_version = parts;
  const size_t v = other_version.manifest.find("tinymlir ") + 9;
  other_version.manifest.replace(v, other_version.manifest.find(' ', v) - v, "9.9.9");
  expect_refused(Join(good.substr(0, 8), other_version), TM_ERROR_UNSUPPORTED,
                 "compiled by tinymlir 9.9.9");
  Parts other_cpu = parts;
  const size_t c = other_cpu.manifest.find("target cpu x86_64-") + 11;
  other_cpu.manifest.replace(c, 6, "aarch64");
  expect_refused(Join(good.substr(0, 8), other_cpu), TM_ERROR_UNSUPPORTED, "aarch64");

  // A tensor of a rank no traced program can have (above TM_MAX_RANK): the program's input
  // f32[4] becomes f32[4,1,...,1] of rank TM_MAX_RANK + 1, checksum and all else valid.
  Parts too_deep = parts;
  // The payload: format, the device's name as text ("cpu": its length, then 3 bytes), the
  // input count, the input's dtype, rank and dimensions.
  const size_t device_text = 8 + 3;
  const size_t rank_at = 8 + device_text + 2 * 8;
  uint64_t rank = 0, dim = 0;
  std::memcpy(&rank, too_deep.payload.data() + rank_at, 8);
  std::memcpy(&dim, too_deep.payload.data() + rank_at + 8, 8);
  ASSERT_EQ(rank, 1u) << "the test's reading of the format";
  ASSERT_EQ(dim, 4u) << "the test's reading of the format";
  rank = TM_MAX_RANK + 1;
  std::string dims(reinterpret_cast<const char *>(&dim), 8);
  const uint64_t one = 1;
  for (int d = 1; d < TM_MAX_RANK + 1; ++d) dims.append(reinterpret_cast<const char *>(&one), 8);
  too_deep.payload = too_deep.payload.substr(0, rank_at) +
                     std::string(reinterpret_cast<const char *>(&rank), 8) + dims +
                     too_deep.payload.substr(rank_at + 16);
  expect_refused(Join(good.substr(0, 8), too_deep), TM_ERROR_IO, "malformed");

  // A q8_0 tensor its blocks cannot hold: invoke would describe its bytes by blocks of 32
  // along the last axis. The input f32[4] as q8_0[4] (4 is no multiple of 32), and as q8_0
  // of rank 0; each refused, not invoked.
  const size_t dtype_at = 8 + device_text + 8;
  const uint64_t q8 = TM_Q8_0;
  Parts partial_block = parts;
  partial_block.payload.replace(dtype_at, 8, reinterpret_cast<const char *>(&q8), 8);
  expect_refused(Join(good.substr(0, 8), partial_block), TM_ERROR_IO, "malformed");
  Parts scalar_blocks = partial_block;
  const uint64_t zero = 0;
  scalar_blocks.payload = scalar_blocks.payload.substr(0, rank_at) +
                          std::string(reinterpret_cast<const char *>(&zero), 8) +
                          scalar_blocks.payload.substr(rank_at + 16);
  expect_refused(Join(good.substr(0, 8), scalar_blocks), TM_ERROR_IO, "malformed");

  std::remove(path.c_str());
  tm_program *p = nullptr;
  TM_EXPECT_STATUS(tm_program_load(path.c_str(), &p), TM_ERROR_IO);
  EXPECT_NE(std::string(tm_last_error()).find(path), std::string::npos);
  TM_EXPECT_STATUS(tm_program_load(nullptr, &p), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_program_load(path.c_str(), nullptr), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_program_export(nullptr, path.c_str()), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_program_export(jit, nullptr), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_program_export(jit, "/nonexistent-dir/x.tmp"), TM_ERROR_IO);
}

// What is at the export path decides: a regular file or a symlink is replaced (the link
// itself: what it points to is untouched), while a FIFO, a device or a folder is refused
// and left as it was (root exporting onto /dev/full once replaced the device). A file name
// of NAME_MAX bytes works (the temporary file's suffix must not make it too long).
TEST(ProgramFile, ExportReplacesOnlyRegularFilesAndLinks) {
  Context ctx = NewContext();
  Program jit = CompileSmallExp(ctx);
  ASSERT_NE(jit.get(), nullptr);
  const std::string dir = TempPath("targets");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);

  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  TM_EXPECT_STATUS(tm_program_export(jit, fifo.c_str()), TM_ERROR_IO);
  EXPECT_NE(std::string(tm_last_error()).find("it is a FIFO; only a regular file is replaced"),
            std::string::npos)
      << tm_last_error();
  struct stat st;
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  TM_EXPECT_STATUS(tm_program_export(jit, "/dev/null"), TM_ERROR_IO);
  EXPECT_NE(std::string(tm_last_error()).find("a character device"), std::string::npos)
      << tm_last_error();
  TM_EXPECT_STATUS(tm_program_export(jit, dir.c_str()), TM_ERROR_IO);
  EXPECT_NE(std::string(tm_last_error()).find("a folder"), std::string::npos) << tm_last_error();

  const std::string victim = dir + "/victim", link = dir + "/link";
  WriteFile(victim, "precious");
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  TM_ASSERT_OK(tm_program_export(jit, link.c_str()));
  EXPECT_EQ(ReadFile(victim), "precious");
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link was not replaced by the program file";

  const std::string longest = dir + "/" + std::string(NAME_MAX, 'p');
  TM_ASSERT_OK(tm_program_export(jit, longest.c_str()));
  Program loaded;
  TM_ASSERT_OK(tm_program_load(longest.c_str(), loaded.out()));
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

}  // namespace
}  // namespace tmtest

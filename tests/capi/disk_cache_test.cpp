// The disk cache (tm_cache_set_dir): a program compiled by one context is read back by
// another (as by another process: each context has its own memory cache), entries are
// checked (checksum, key, owner), written atomically, bounded, and no problem with the
// directory ever fails a compile.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "test_util.h"

namespace tmtest {
namespace {

// Removes the directories the tests made when the test program exits.
struct Cleanup {
  std::vector<std::string> dirs;
  ~Cleanup() {
    for (const std::string &dir : dirs) {
      std::string cmd = "chmod -R u+rwx '" + dir + "' 2>/dev/null; rm -rf '" + dir + "'";
      if (std::system(cmd.c_str()) != 0) continue;
    }
  }
} cleanup;

// A fresh directory under the test's temporary directory.
std::string FreshDirectory(const std::string &name) {
  const char *tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/tinymlir-disk-cache-test-" +
                    std::to_string(getpid()) + "-" + name;
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  cleanup.dirs.push_back(dir);
  return dir;
}

std::vector<std::string> Entries(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (struct dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmc") == 0) names.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  return names;
}

tm_cache_info Info(tm_context *ctx) {
  tm_cache_info info;
  info.struct_size = sizeof info;
  EXPECT_EQ(tm_cache_get_info(ctx, &info), TM_OK) << tm_last_error();
  return info;
}

std::string Message(tm_context *ctx) {
  size_t len = 0;
  EXPECT_EQ(tm_cache_disk_message(ctx, nullptr, 0, &len), TM_OK) << tm_last_error();
  std::string text(len + 1, '\0');
  EXPECT_EQ(tm_cache_disk_message(ctx, &text[0], text.size(), &len), TM_OK);
  text.resize(len);
  return text;
}

Context ContextWithDisk(const std::string &dir, uint64_t limit = 0) {
  Context ctx = NewContext();
  EXPECT_EQ(tm_cache_set_dir(ctx, dir.c_str(), limit), TM_OK) << tm_last_error();
  return ctx;
}

// y = tanh(x @ w) * scale + c, c a constant (so constants are part of the key), n columns.
struct Result {
  std::vector<float> y;
  bool from_disk = false;
};

Result CompileAndRun(tm_context *ctx, int64_t n, float scale = 0.5f, float constant = 1.0f,
                     const tm_compile_options *options = nullptr) {
  Trace t = NewTrace(ctx, "disk");
  tm_value x = Input(t, TM_F32, {3, 4});
  tm_value w = Input(t, TM_F32, {4, n});
  std::vector<float> cdata(static_cast<size_t>(n), constant);
  std::vector<int64_t> cshape = {n};
  tm_tensor c = {cdata.data(), TM_F32, 1, cshape.data(), nullptr};
  tm_value cv = Op(tm_op_constant, t, &c);
  tm_value s = Op(tm_op_scalar, t, TM_F64, static_cast<double>(scale));
  End(t, {Op(tm_op_add, t, Op(tm_op_mul, t, Op(tm_op_tanh, t, Op(tm_op_matmul, t, x, w)), s), cv)});
  Host<float> xs({3, 4}, 0.0f), ws({4, n}, 0.0f);
  for (int i = 0; i < 12; ++i) xs[i] = 0.1f * static_cast<float>(i) - 0.5f;
  for (int64_t i = 0; i < 4 * n; ++i) ws[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  Host<float> y({3, n}, -1.0f);
  Program p;
  Result r;
  EXPECT_EQ(CompileInvoke(ctx, t, {xs.view(), ws.view()}, {y.view()}, options, &p), TM_OK)
      << tm_last_error();
  r.from_disk = tm_program_from_disk_cache(p) == 1;
  // The stages are all there, whichever way the program came.
  EXPECT_NE(StageText(p, TM_STAGE_LLVM_IR).find("tm_packed_entry"), std::string::npos);
  EXPECT_FALSE(StageText(p, TM_STAGE_ASSEMBLY).empty());
  // Against a double-precision loop: within 1e-5 relative + 1e-6 absolute.
  for (int i = 0; i < 3; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += double(xs[i * 4 + k]) * ws[k * n + j];
      const double want = std::tanh(acc) * scale + constant;
      EXPECT_NEAR(y[i * n + j], want, 1e-6 + 1e-5 * std::fabs(want)) << i << "," << j;
    }
  r.y = y.data;
  return r;
}

TEST(DiskCache, ASecondContextReadsWhatTheFirstCompiled) {
  const std::string dir = FreshDirectory("hit");
  Context first = ContextWithDisk(dir);
  Result compiled = CompileAndRun(first, 5);
  EXPECT_FALSE(compiled.from_disk);
  tm_cache_info info = Info(first);
  EXPECT_EQ(info.disk_misses, 1u);
  EXPECT_EQ(info.disk_writes, 1u);
  EXPECT_EQ(info.disk_hits, 0u);
  ASSERT_EQ(Entries(dir).size(), 1u);
  EXPECT_EQ(info.disk_bytes, ReadFile(Entries(dir)[0]).size());
  EXPECT_EQ(info.disk_limit_bytes, 1ull << 30);
  EXPECT_EQ(Message(first), dir + ": on");

  Context second = ContextWithDisk(dir);
  Result loaded = CompileAndRun(second, 5);
  EXPECT_TRUE(loaded.from_disk);
  EXPECT_EQ(loaded.y, compiled.y);  // the same native code: bit-identical
  info = Info(second);
  EXPECT_EQ(info.disk_hits, 1u);
  EXPECT_EQ(info.disk_writes, 0u);
  EXPECT_EQ(info.misses, 1u);  // a memory miss, answered from disk

  // The directory is owner-only, and so are its entries.
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(Entries(dir)[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(DiskCache, TheManifestNamesEveryPartOfTheKey) {
  const std::string dir = FreshDirectory("manifest");
  Context ctx = ContextWithDisk(dir);
  CompileAndRun(ctx, 3);
  ASSERT_EQ(Entries(dir).size(), 1u);
  const std::string entry = ReadFile(Entries(dir)[0]);
  for (const char *part : {"tinymlir ", " build ", "\nllvm 22.", "\ntarget cpu x86_64",
                           "\noptions target=0 optimize=1 opt_level=3 use_blas=1\n", "inputs f32(3,4) f32(4,3)",
                           "outputs f32(3,3)"})
    EXPECT_NE(entry.find(part), std::string::npos) << "manifest lacks '" << part << "'";
}

TEST(DiskCache, EveryPartOfTheProgramAndOptionsChangesTheKey) {
  const std::string dir = FreshDirectory("keys");
  Context ctx = ContextWithDisk(dir);
  CompileAndRun(ctx, 4);
  tm_compile_options no_fusion = Options(/*optimize=*/0), no_blas = Options(1, /*use_blas=*/0),
                     o1 = Options(1, 1, /*opt_level=*/1);
  // Each variant, in a fresh context so that the memory cache cannot answer: a disk miss.
  struct Variant {
    const char *what;
    int64_t n;
    float scale, constant;
    const tm_compile_options *options;
  } variants[] = {{"shape", 6, 0.5f, 1.0f, nullptr},
                  {"scalar", 4, 0.25f, 1.0f, nullptr},
                  {"constant", 4, 0.5f, 2.0f, nullptr},
                  {"optimize", 4, 0.5f, 1.0f, &no_fusion},
                  {"use_blas", 4, 0.5f, 1.0f, &no_blas},
                  {"opt_level", 4, 0.5f, 1.0f, &o1}};
  size_t entries = 1;
  for (const Variant &v : variants) {
    Context fresh = ContextWithDisk(dir);
    Result r = CompileAndRun(fresh, v.n, v.scale, v.constant, v.options);
    EXPECT_FALSE(r.from_disk) << v.what << " did not change the key";
    EXPECT_EQ(Entries(dir).size(), ++entries) << v.what;
  }
  // And the original is still a hit.
  Context again = ContextWithDisk(dir);
  EXPECT_TRUE(CompileAndRun(again, 4).from_disk);
}

TEST(DiskCache, ExplainingSaysWhichPartOfTheKeyDiffered) {
  const std::string dir = FreshDirectory("explain");
  setenv("TINYMLIR_EXPLAIN_CACHE", "1", 1);
  {
    Context ctx = ContextWithDisk(dir);
    CompileAndRun(ctx, 4);
    EXPECT_NE(Message(ctx).find("disk cache miss for trace disk: the cache holds no entry"),
              std::string::npos)
        << Message(ctx);
  }
  {
    Context ctx = ContextWithDisk(dir);
    tm_compile_options o1 = Options(1, 1, /*opt_level=*/1);
    CompileAndRun(ctx, 4, 0.5f, 1.0f, &o1);
    EXPECT_NE(Message(ctx).find("options target=0 optimize=1 opt_level=1 use_blas=1 (nearest "
                                "entry: options target=0 optimize=1 opt_level=3 use_blas=1)"),
              std::string::npos)
        << Message(ctx);
  }
  {
    Context ctx = ContextWithDisk(dir);
    CompileAndRun(ctx, 6);
    const std::string why = Message(ctx);
    EXPECT_NE(why.find("inputs f32(3,4) f32(4,6) (nearest entry: inputs f32(3,4) f32(4,4))"),
              std::string::npos)
        << why;
    EXPECT_EQ(why.find("opt_level"), std::string::npos) << "options were equal: " << why;
  }
  unsetenv("TINYMLIR_EXPLAIN_CACHE");
}

TEST(DiskCache, ACorruptEntryIsRefusedRemovedAndRebuilt) {
  const std::string dir = FreshDirectory("corrupt");
  {
    Context ctx = ContextWithDisk(dir);
    CompileAndRun(ctx, 5);
  }
  ASSERT_EQ(Entries(dir).size(), 1u);
  const std::string path = Entries(dir)[0];
  const std::string good = ReadFile(path);
  const std::string truncated = good.substr(0, good.size() / 2);
  std::string flipped_bytes = good;
  flipped_bytes[flipped_bytes.size() / 2] ^= 0x5a;
  const std::string flipped = flipped_bytes;
  const std::string empty;
  for (const std::string *bad : {&truncated, &flipped, &empty}) {
    WriteFile(path, *bad);
    Context ctx = ContextWithDisk(dir);
    Result r = CompileAndRun(ctx, 5);  // checks the values
    EXPECT_FALSE(r.from_disk);
    tm_cache_info info = Info(ctx);
    EXPECT_EQ(info.disk_corrupt, 1u);
    EXPECT_EQ(info.disk_hits, 0u);
    EXPECT_EQ(info.disk_writes, 1u) << "rebuilt";
    EXPECT_NE(Message(ctx).find("corrupt"), std::string::npos) << Message(ctx);
    EXPECT_EQ(ReadFile(path), good) << "the rebuilt entry equals the original";
  }
}

TEST(DiskCache, ContextsWritingTheSameEntryAtOnceLeaveAValidOne) {
  const std::string dir = FreshDirectory("race");
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      Context ctx = ContextWithDisk(dir);
      CompileAndRun(ctx, 7);
    });
  for (std::thread &t : threads) t.join();
  ASSERT_EQ(Entries(dir).size(), 1u);  // no temporary files left beside it either
  DIR *d = opendir(dir.c_str());
  int files = 0;
  while (struct dirent *e = readdir(d)) files += e->d_name[0] != '.' || std::string(e->d_name).rfind(".tmp", 0) == 0;
  closedir(d);
  EXPECT_EQ(files, 1);
  Context reader = ContextWithDisk(dir);
  EXPECT_TRUE(CompileAndRun(reader, 7).from_disk);
  EXPECT_EQ(Info(reader).disk_corrupt, 0u);
}

TEST(DiskCache, TheLeastRecentlyUsedEntriesGoPastTheLimit) {
  const std::string dir = FreshDirectory("lru");
  Context ctx = ContextWithDisk(dir);
  CompileAndRun(ctx, 2);
  ASSERT_EQ(Entries(dir).size(), 1u);
  const uint64_t one = Info(ctx).disk_bytes;
  // Room for about two entries.
  Context bounded = ContextWithDisk(dir, one * 2 + one / 2);
  CompileAndRun(bounded, 3);
  sleep(1);  // mtime resolution on some file systems
  {
    Context reader = ContextWithDisk(dir, one * 2 + one / 2);
    EXPECT_TRUE(CompileAndRun(reader, 2).from_disk);  // n=2 is now the most recent
  }
  sleep(1);
  CompileAndRun(bounded, 4);  // a third entry: the least recently used (n=3) goes
  tm_cache_info info = Info(bounded);
  EXPECT_EQ(info.disk_evictions, 1u);
  EXPECT_EQ(Entries(dir).size(), 2u);
  EXPECT_LE(info.disk_bytes, one * 2 + one / 2);
  Context check = ContextWithDisk(dir);
  EXPECT_TRUE(CompileAndRun(check, 2).from_disk);
  EXPECT_TRUE(CompileAndRun(check, 4).from_disk);
  EXPECT_FALSE(CompileAndRun(check, 3).from_disk);
}

TEST(DiskCache, AnUnusableDirectoryDegradesToCompiling) {
  const std::string base = FreshDirectory("unusable");
  ASSERT_EQ(mkdir(base.c_str(), 0700), 0);
  WriteFile(base + "/file", "not a directory");
  Context ctx = ContextWithDisk(base + "/file/cache");
  Result r = CompileAndRun(ctx, 3);  // compiles, correct
  EXPECT_FALSE(r.from_disk);
  tm_cache_info info = Info(ctx);
  EXPECT_EQ(info.disk_writes, 0u);
  EXPECT_EQ(info.disk_hits + info.disk_misses, 0u);
  EXPECT_EQ(info.disk_limit_bytes, 0u) << "every disk field is 0 while it is off (tinymlir.h)";
  EXPECT_NE(Message(ctx).find("cannot create the cache directory"), std::string::npos)
      << Message(ctx);
}

TEST(DiskCache, ADirectoryOthersCanWriteIsRefused) {
  const std::string dir = FreshDirectory("insecure");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  Context ctx = ContextWithDisk(dir);
  CompileAndRun(ctx, 3);
  EXPECT_TRUE(Entries(dir).empty());
  EXPECT_NE(Message(ctx).find("writable by group or others"), std::string::npos) << Message(ctx);
}

TEST(DiskCache, AnEntryOwnedByAnotherUserIsNotLoaded) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const std::string dir = FreshDirectory("owner");
  {
    Context ctx = ContextWithDisk(dir);
    CompileAndRun(ctx, 3);
  }
  ASSERT_EQ(Entries(dir).size(), 1u);
  ASSERT_EQ(chown(Entries(dir)[0].c_str(), 4242, 4242), 0);
  Context ctx = ContextWithDisk(dir);
  EXPECT_FALSE(CompileAndRun(ctx, 3).from_disk);
  EXPECT_NE(Message(ctx).find("owned by another user"), std::string::npos) << Message(ctx);
}

TEST(DiskCache, OffMeansNoFiles) {
  Context ctx = NewContext();
  TM_ASSERT_OK(tm_cache_set_dir(ctx, nullptr, 0));
  EXPECT_FALSE(CompileAndRun(ctx, 3).from_disk);
  tm_cache_info info = Info(ctx);
  EXPECT_EQ(info.disk_writes + info.disk_hits + info.disk_misses, 0u);
  EXPECT_EQ(info.disk_limit_bytes, 0u) << "every disk field is 0 while it is off (tinymlir.h)";
  EXPECT_NE(Message(ctx).find("off"), std::string::npos);
  TM_EXPECT_STATUS(tm_cache_set_dir(nullptr, nullptr, 0), TM_ERROR_INVALID_ARGUMENT);
  size_t len;
  TM_EXPECT_STATUS(tm_cache_disk_message(ctx, nullptr, 4, &len), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_cache_disk_message(ctx, nullptr, 0, nullptr), TM_ERROR_INVALID_ARGUMENT);
}

TEST(DiskCache, TheEnvironmentPicksTheDefaultDirectory) {
  const std::string dir = FreshDirectory("env");
  const char *saved = std::getenv("TINYMLIR_CACHE_DIR");
  std::string old = saved ? saved : "";
  setenv("TINYMLIR_CACHE_DIR", dir.c_str(), 1);
  {
    Context ctx = NewContext();
    EXPECT_EQ(Message(ctx), dir + ": on");
    Context explicit_default = NewContext();
    TM_ASSERT_OK(tm_cache_set_dir(explicit_default, "", 0));  // "" = the default
    EXPECT_EQ(Message(explicit_default), dir + ": on");
  }
  setenv("TINYMLIR_CACHE_DIR", "off", 1);
  {
    Context ctx = NewContext();
    EXPECT_NE(Message(ctx).find("off"), std::string::npos);
  }
  if (saved) setenv("TINYMLIR_CACHE_DIR", old.c_str(), 1);
  else unsetenv("TINYMLIR_CACHE_DIR");
}

// Every name in `dir` (entries, temporary files, anything).
std::vector<std::string> AllNames(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (struct dirent *e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

// A host under a file size limit (ulimit -f), with SIGXFSZ at its default (end the process):
// the cache's write, which the caller never asked for, is refused before it is made; the
// program is compiled and right; the next program, within the limit again, is saved.
TEST(DiskCache, AFileSizeLimitRefusesTheWriteNotTheProcess) {
  const std::string dir = FreshDirectory("fsize");
  Context ctx = ContextWithDisk(dir);
  struct sigaction previous_action, default_action = {};
  default_action.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGXFSZ, &default_action, &previous_action), 0);
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit small = saved;
  small.rlim_cur = 4096;  // an entry is ~100 KB
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const Result r = CompileAndRun(ctx, 3);
  const std::string message = Message(ctx);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  ASSERT_EQ(sigaction(SIGXFSZ, &previous_action, nullptr), 0);
  EXPECT_FALSE(r.from_disk);
  EXPECT_EQ(Info(ctx).disk_writes, 0u);
  EXPECT_NE(message.find("file size limit (RLIMIT_FSIZE"), std::string::npos) << message;
  EXPECT_TRUE(AllNames(dir).empty()) << "a temporary file was left";
  CompileAndRun(ctx, 4);
  EXPECT_EQ(Info(ctx).disk_writes, 1u) << "one refused write turned the disk cache off";
}

// A writer killed while writing an entry leaves its temporary file: the next context to
// use the directory removes it once it is old enough not to be anyone's current write.
TEST(DiskCache, TemporaryFilesOfDeadWritersAreRemoved) {
  const std::string dir = FreshDirectory("stale");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string stale = dir + "/0123456789abcdef0123456789abcdef.tmc.tmp.99999.0";
  const std::string fresh = dir + "/0123456789abcdef0123456789abcdef.tmc.tmp.99999.1";
  WriteFile(stale, std::string(50000, 'x'));
  WriteFile(fresh, std::string(50000, 'x'));
  const struct timespec an_hour_ago[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, stale.c_str(), an_hour_ago, 0), 0);
  Context ctx = ContextWithDisk(dir);
  EXPECT_EQ(Info(ctx).disk_bytes, 0u) << "temporary files are not entries";
  EXPECT_NE(access(stale.c_str(), F_OK), 0) << "an hour-old temporary file is still there";
  EXPECT_EQ(access(fresh.c_str(), F_OK), 0) << "a temporary file being written was removed";
}

// The default directory, $HOME/.cache/tinymlir, is never made with its home: a service
// account's HOME that does not exist stays so, and the cache says why it is off.
TEST(DiskCache, AHomeThatDoesNotExistIsNotCreated) {
  const std::string base = FreshDirectory("home");
  ASSERT_EQ(mkdir(base.c_str(), 0700), 0);
  const std::string home = base + "/nonexistent";
  std::vector<std::pair<const char *, std::string>> saved;
  for (const char *name : {"TINYMLIR_CACHE_DIR", "XDG_CACHE_HOME", "HOME"}) {
    const char *value = std::getenv(name);
    saved.push_back({name, value ? value : std::string("\x01unset")});
  }
  unsetenv("TINYMLIR_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", home.c_str(), 1);
  {
    Context ctx = NewContext();
    EXPECT_FALSE(CompileAndRun(ctx, 3).from_disk);
    EXPECT_NE(access(home.c_str(), F_OK), 0) << "HOME was created";
    EXPECT_NE(Message(ctx).find("HOME (" + home + ") is not an existing folder"), std::string::npos)
        << Message(ctx);
  }
  for (const auto &[name, value] : saved)
    if (value == "\x01unset")
      unsetenv(name);
    else
      setenv(name, value.c_str(), 1);
}

TEST(DiskCache, InfoKeepsTheFirstLayout) {
  // A caller built against the first header (56 bytes) gets exactly those fields.
  Context ctx = NewContext();
  unsigned char raw[sizeof(tm_cache_info)];
  std::memset(raw, 0xab, sizeof raw);
  tm_cache_info *info = reinterpret_cast<tm_cache_info *>(raw);
  info->struct_size = 56;
  TM_ASSERT_OK(tm_cache_get_info(ctx, info));
  for (size_t i = 56; i < sizeof raw; ++i) ASSERT_EQ(raw[i], 0xab) << "byte " << i;
}

}  // namespace
}  // namespace tmtest

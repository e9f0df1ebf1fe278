#!/usr/bin/env python3
"""Mutation testing: plants each bug of MUTATIONS below, one at a time, rebuilds, runs the
tests that must catch it, and reports which were killed (a test failed) and which survived.
Every mutation must be killed; the script exits 1 if one survives. The tree is restored
after each (and on interruption).

    scripts/mutate.py [--build DIR] [--only NAME...] [--list]

The build directory (default build-mutate, configured on first use from ccache) is the
script's own, so a mutant never lands in build/. Run it before you stop when you have
touched what a mutation covers; add a mutation when you add a check worth keeping honest.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, file, text to find, replacement, ctest regex of the tests that must catch it).
# The text must occur exactly once in the file.
MUTATIONS = [
    ("pass: elementwise fusion never fuses",
     "core/compiler/passes/fuse_elementwise.cpp",
     "  if (!SingleUseProducer(fused)) return false;\n  return BodyOps(",
     "  if (!SingleUseProducer(fused) || true) return false;\n  return BodyOps(",
     "pass_filecheck_tests"),
    ("pass: the BLAS rewrite swaps the transpose flags",
     "core/targets/cpu/compile/blas_rewrite.cpp",
     "constexpr int kNoTrans = 111;\nconstexpr int kTrans = 112;",
     "constexpr int kNoTrans = 112;\nconstexpr int kTrans = 111;",
     "pass_filecheck_tests|BlasProducts|Ops/OpsT"),
    ("cache key: the GPU matmul tile is left out of the options' encoding",
     "core/contract/compile_options.cpp",
     "  for (const auto &[name, value] : options.target_options)\n    text +=",
     "  for (const auto &[name, value] : options.target_options)\n    if (name != \"gpu_matmul_tile\") text +=",
     "CacheKey"),
    ("targets: the GPU target accepts q8_0 inputs",
     "core/targets/gpu/run/gpu_target.cpp",
     "      if (IsQuantized(t.dtype))\n        return Unsupported(",
     "      if (false && IsQuantized(t.dtype))\n        return Unsupported(",
     "Q8_0.TheGpuTargetRefusesIt|WeightsDtype"),
    ("targets: devices are found by their target's name",
     "core/engine/targets.cpp",
     "    for (const Device *d : t->devices())\n      if (name == d->name()) return d;",
     "    for (const Device *d : t->devices())\n      if (name == t->name()) return d;",
     "backend_ops_gpu_emulated|GpuEmulat"),
    ("op table: a call with too many values reaches the rule",
     "core/trace/ops.cpp",
     "  if (row->variadic ? n_values < 1 : n_values != row->value_parameters)",
     "  if (row->variadic ? n_values < 1 : n_values < row->value_parameters)",
     "OpTable"),
    ("op table: reduce_max starts from 0",
     "core/compiler/builder/build_module.cpp",
     "    identity = f ? -std::numeric_limits<double>::infinity()",
     "    identity = f ? 0.0",
     "^backend_ops$"),
    ("op table: argmax keeps the last of equal elements",
     "core/compiler/builder/build_module.cpp",
     "CmpFOp::create(b, loc_, CmpFPredicate::OGT, args[0], args[1]);",
     "CmpFOp::create(b, loc_, CmpFPredicate::OGE, args[0], args[1]);",
     "^backend_ops$"),
    ("op table: argmax lets a later NaN replace an earlier one",
     "core/compiler/builder/build_module.cpp",
     "Value first_nan = mlir::arith::AndIOp::create(b, loc_, nan, best_number);",
     "Value first_nan = nan;",
     "^backend_ops$"),
    ("pass: device code modules are never merged",
     "core/compiler/passes/merge_identical_functions.cpp",
     "         mlir::SymbolTable::getNearestSymbolTable(op) == op;",
     "         mlir::SymbolTable::getNearestSymbolTable(op) != op;",
     "pass_filecheck_tests|GpuTarget.IdenticalKernels"),
    ("cache key: the host's description lists every feature as present",
     "core/support/host_cpu.cpp",
     '(f.present ? "+" : "-") + f.name;',
     '"+" + f.name;',
     "CacheKey.EveryVariable"),
    ("op table: rsqrt lowers to sqrt",
     "core/trace/unary_ops.def",
     "1.0 / R(std::sqrt(x)), m.Div(m.Constant(1.0), m.Sqrt(x)))",
     "1.0 / R(std::sqrt(x)), m.Sqrt(x))",
     "UnaryOps|UnaryOpTable"),
    ("composite: softmax reduces over the last axis whatever the axis",
     "core/trace/composites.cpp",
     "TM_RETURN_IF_ERROR(g.Reduce(OpKind::kReduceMax, op, x, axis, true, &max));",
     "TM_RETURN_IF_ERROR(g.Reduce(OpKind::kReduceMax, op, x, -1, true, &max));",
     "fuzz_capi$"),
    ("kernel: the GEMV dot products drop their scalar tail",
     "core/targets/cpu/run/gemv_kernels.cpp",
     "  for (int64_t j = body; j < k; ++j) sum = std::fma(E::One(row + j), x[j], sum);",
     "  for (int64_t j = body; j + 1 < k; ++j) sum = std::fma(E::One(row + j), x[j], sum);",
     "Ops/OpsT|HalfWeights|Half|BlasProducts|Gemv"),
    ("model: sampling ignores the temperature",
     "gpt2/src/sampler.cpp",
     "probs_[i] = std::isnan(l) ? 0.0 : std::exp(l / options_.temperature - max);",
     "probs_[i] = std::isnan(l) ? 0.0 : std::exp(l - max * options_.temperature);",
     "SamplerDistribution"),
    ("model: the attention mask hides one position too few",
     "gpt2/src/model.cpp",
     "std::fill(mask_.data(), mask_.data() + mask_.size(), hidden);",
     "std::fill(mask_.data(), mask_.data() + mask_.size() - 1, hidden);",
     "Gpt2Golden"),
    ("ABI: the options initializer writes the library's size, not the caller's",
     "core/support/versioned_struct.h",
     "  std::memcpy(bytes, &defaults, std::min(size, sizeof(T)));",
     "  std::memcpy(bytes, &defaults, sizeof(T));",
     "abi_struct_layouts"),
    ("ABI: a published struct grows in place",
     "capi/include/tinymlir/tinymlir.h",
     "  int32_t optimize;     /* run canonicalize/cse/elementwise fusion (default 1) */",
     "  int64_t optimize;     /* run canonicalize/cse/elementwise fusion (default 1) */",
     "abi_libtinymlir$"),
    ("layering: the runtime's C shims include the compile driver",
     "capi/src/run/program_run.cpp",
     '#include "core/engine/program_loader.h"',
     '#include "core/engine/program_loader.h"\n#include "core/driver/compile.h"',
     "layering"),
    ("binding: Python's unary functions call the next op of the table",
     "bindings/python/tinymlir/ops.py",
     "    globals()[_name] = _unary_function(_op, _name)",
     "    globals()[_name] = _unary_function((_op + 1) % len(UNARY_OPS), _name)",
     "python_binding_tests"),
    ("binding: Go's generated methods are not regenerated after a table change",
     "bindings/go/unary_ops.go",
     "UnaryAbs     UnaryOp = 7",
     "UnaryAbs     UnaryOp = 6",
     "go_binding_tests"),
    ("q8_0 trace: a right operand as stored (blocks across the contraction) is let through",
     "core/trace/trace.cpp",
     "  if (qb && !IsTransposedQuantized(b))",
     "  if (false && qb && !IsTransposedQuantized(b))",
     "Q8_0[.]EveryOtherUse"),
    ("q8_0 builder: the scale's two bytes swapped",
     "core/compiler/builder/build_module.cpp",
     "                                       map(b_.getAffineConstantExpr(0)),\n                                       map(b_.getAffineConstantExpr(1)),",
     "                                       map(b_.getAffineConstantExpr(1)),\n                                       map(b_.getAffineConstantExpr(0)),",
     "Q8_0[.]"),
    ("q8_0 BLAS rewrite: x's vectors read along the wrong axis",
     "core/targets/cpu/compile/blas_rewrite.cpp",
     "      const bool rows_of_x = q.transposed != tx;",
     "      const bool rows_of_x = q.transposed == tx;",
     "Q8_0[.]Products"),
    ("q8_0 kernel: the portable variant pairs each weight with its neighbour's activation",
     "core/targets/cpu/run/q8_0.cpp",
     "    const int32_t t = q[2 * l] * qx[2 * l] + q[2 * l + 1] * qx[2 * l + 1];",
     "    const int32_t t = q[2 * l] * qx[2 * l + 1] + q[2 * l + 1] * qx[2 * l];",
     "Q8_0Gemv"),
    ("q8_0 activations: the vector quantizer rounds toward zero",
     "core/targets/cpu/run/q8_0.cpp",
     "                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));",
     "                                                _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));",
     "Q8_0Activations|Q8_0Gemv"),
    ("q8_0 activations: the scale one binade too small (15-bit integers overflow the pairs)",
     "core/targets/cpu/run/q8_0.cpp",
     "  return std::max(-149, log2 - 13);",
     "  return std::max(-149, log2 - 14);",
     "Q8_0Activations|Q8_0Gemv"),
    ("lane tree: the AVX-512 variants' upper eight lanes a hair too large",
     "core/targets/cpu/run/lane_tree.h",
     "  return Tree256(_mm512_castps512_ps256(acc),\n",
     "  return Tree256(_mm512_castps512_ps256(acc), _mm256_mul_ps(_mm256_set1_ps(1.0f + 0x1p-20f),\n"
     "      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1))));\n"
     "  return Tree256(_mm512_castps512_ps256(acc),\n",
     "logits_do_not_depend_on_the_cpu_extensions|Q8_0Gemv"),
    ("row ranges: the last row of every range of more than eight is skipped",
     "core/targets/cpu/run/row_dots.h",
     "      rows(i0, i0 + take);",
     "      rows(i0, i0 + take - (take > 8 ? 1 : 0));",
     "Q8_0Gemv|Q8_0[.]Products|HalfPrecision"),
    ("batched GEMV: the rows kernel's groups of rows not a multiple of eight",
     "core/targets/cpu/run/gemv_kernels.cpp",
     "constexpr int64_t kBatchRowGroup = 16;",
     "constexpr int64_t kBatchRowGroup = 12;",
     "GemvBatched"),
    ("BLAS rewrite: every operand of a batched GEMV call steps by C's batch stride",
     "core/targets/cpu/compile/blas_rewrite.cpp",
     "      if (batch) args.push_back(ToI64(loc, x.batch_stride));",
     "      if (batch) args.push_back(ToI64(loc, c.batch_stride));",
     "Gpt2Golden"),
    ("invoke: a strided q8_0 tensor is taken as dense",
     "core/engine/invoke.cpp",
     "  if (t.strides && !std::equal(t.strides, t.strides + t.rank, dense))",
     "  if (false && t.strides && !std::equal(t.strides, t.strides + t.rank, dense))",
     "Q8_0[.]Invoke"),
    ("model: q8_0 weights are never quantized (F32 matrices where the programs take blocks)",
     "gpt2/src/model.cpp",
     "                                             return QuantizeMatrix(w, &blocks);",
     "                                             return Status::Ok();",
     "WeightsDtype[.]Q8_0|cli_weights_dtypes"),
    ("prepared weights: a tensor's checksum is not compared",
     "gpt2/src/prepared_weights.cpp",
     "      if (Checksum(w->host.data(), e.bytes) != e.checksum) corrupt = static_cast<int>(i);",
     "      if (false) corrupt = static_cast<int>(i);",
     "PreparedWeights"),
    ("weight memory: huge pages are never asked for",
     "gpt2/src/weight_memory.cpp",
     "  if (huge) (void)madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);",
     "  if (false) (void)madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);",
     "PreparedWeights[.](LargeTensorsAreInHugePages|MatricesUnderAHugePage)"),
    ("weight memory: every part of an arena starts at the arena's start",
     "gpt2/src/weight_memory.cpp",
     "  used_ += space;",
     "  used_ += 0 * space;",
     "Gpt2WeightsTest|HostArenaTest|PreparedWeights"),
    ("weight memory: an arena's parts rounded to 32 bytes, not to a cache line",
     "gpt2/src/weight_memory.cpp",
     "size_t HostArena::Space(size_t bytes) { return (bytes + 63) / 64 * 64; }",
     "size_t HostArena::Space(size_t bytes) { return (bytes + 31) / 32 * 32; }",
     "Gpt2WeightsTest|HostArenaTest"),
    ("weights: q8_0 blocks in a mapping per matrix rather than in the arena",
     "gpt2/src/model.cpp",
     "  TM_RETURN_IF_ERROR(arena->Take(bytes, &blocks));",
     "  TM_RETURN_IF_ERROR(blocks.Allocate(bytes));",
     "PreparedWeights[.]MatricesUnderAHugePage"),
    ("KV cache: the rows a step reads are not written first",
     "gpt2/src/model.cpp",
     "  TouchCacheRows(l);\n",
     "",
     "ModelApi[.]TheKvCacheIsFaultedInOncePerPage"),
    ("prepared key: the checkpoint's time read from its path when the key is made",
     "gpt2/src/prepared_weights.cpp",
     "             std::to_string(file.modified().tv_sec) + \".\" +",
     "             std::to_string([&] { struct stat s; return stat(real, &s) == 0 ? s.st_mtim.tv_sec : 0; }()) + \".\" +",
     "ThePreparedKeyNamesTheCheckpointAsOpened"),
    ("prepared key: the config text left out",
     "gpt2/src/prepared_weights.cpp",
     "Hex64(Fnv1a64(config_text.data(), config_text.size()))",
     "Hex64(Fnv1a64(\"\", 0))",
     "ThePreparedKeyNamesTheCheckpointAsOpened"),
    ("weights: the q8_0 arena sized without the token table",
     "gpt2/src/model.cpp",
     "    if (dtype == TM_Q8_0)\n",
     "    if (dtype == TM_Q8_0 && shape[0] != c.vocab_size)\n",
     "WeightsDtype|PreparedWeights"),
    ("weights: a q8_0 tensor's bytes one short a block",
     "gpt2/src/checkpoint.cpp",
     "  if (d == TM_Q8_0) return n / kQ8BlockElements * kQ8BlockBytes;",
     "  if (d == TM_Q8_0) return n / kQ8BlockElements * kQ8BlockBytes - 1;",
     "WeightsDtype|PreparedWeights"),
    ("panel products: the last panel of C's columns left out",
     "core/targets/cpu/run/panel_products.h",
     "    for (int64_t j0 = 0; j0 < n; j0 += width) {",
     "    for (int64_t j0 = 0; j0 + width < n; j0 += width) {",
     "Q8_0[.]Products|HalfPrecision[.](Matmul|Prefill)"),
    ("panel products: half rows converted as if every panel started at the operand's first row",
     "core/targets/cpu/run/half_matmul.cpp",
     "        const uint16_t *src = half + (stored_rows ? first * ld : first);",
     "        const uint16_t *src = half + (stored_rows ? 0 : first);",
     "HalfPrecision[.](Matmul|Prefill)"),
    ("panel products: A's panels of rows all written over C's first rows",
     "core/targets/cpu/run/panel_products.h",
     "                      c + i0 * ldc, ldc, 0);",
     "                      c, ldc, 0);",
     "HalfPrecision[.]Prefill"),
    ("panel products: q8_0 rows dequantized as if every panel started at the weight's first row",
     "core/targets/cpu/run/q8_0.cpp",
     "DequantizeRowsAny(q8 + (first + r) * q8_ld, q8_ld, rows, k, panel + r * k, k);",
     "DequantizeRowsAny(q8 + r * q8_ld, q8_ld, rows, k, panel + r * k, k);",
     "Q8_0[.]Prefill"),
    ("batched values: the last head left out when the product runs on one thread",
     "core/targets/cpu/run/gemv_kernels.cpp",
     "    elements(0, batch);  // small: on this thread",
     "    elements(0, batch - 1);  // small: on this thread",
     "GemvBatched"),
    ("batched scores: every head dotted with the first head's query",
     "core/targets/cpu/run/gemv_kernels.cpp",
     "        D::template Rows<E, 1>(&row, x + b * stride_x + v * ldx, k, &sum);",
     "        D::template Rows<E, 1>(&row, x + v * ldx, k, &sum);",
     "GemvBatched"),
    ("batched scores: the pool's guided ranges stop one row short of the cache",
     "core/targets/cpu/run/gemv_kernels.cpp",
     "  GuidedRangesOnPool(pool, m, kBatchRowGroup, rows);",
     "  GuidedRangesOnPool(pool, m - 1, kBatchRowGroup, rows);",
     "GemvBatched"),
    ("batched values: the pool's tasks leave out the last head",
     "core/targets/cpu/run/gemv_kernels.cpp",
     "      elements(b0, std::min(batch, b0 + per_task));",
     "      elements(b0, std::min(batch - 1, b0 + per_task));",
     "GemvBatched"),
    ("guided ranges: each participant stops after its first range",
     "core/targets/cpu/run/row_dots.h",
     "      i0 = next_row.load(std::memory_order_relaxed);\n    }",
     "      return;\n    }",
     "Q8_0Gemv|Q8_0[.]Products|HalfPrecision|GemvBatched"),
    ("bench: a round is fast or slow by F32's sample alone, for the Q8_0 / F32 ratio too",
     "bench/bench.py",
     '        both = (x["f32_read_gb_per_s"], x[f"{m}_read_gb_per_s"])',
     '        both = (x["f32_read_gb_per_s"], x["f32_read_gb_per_s"])',
     "bench_side_by_side_ratios"),
    ("perf map: a linked program's functions are not listed",
     "core/engine/program_loader.cpp",
     "  AddToPerfMap(name, *image);\n",
     "",
     "perf_map_names_every_linked_program"),
    ("perf map: a program file's functions are listed without its trace's name",
     "core/engine/program_loader.cpp",
     "  status = LinkProgramObject(program.get(), ManifestLine(manifest, \"trace \"));",
     "  status = LinkProgramObject(program.get(), \"\");",
     "perf_map_names_every_linked_program"),
    ("perf map: written whether asked for or not",
     "core/engine/perf_map.cpp",
     "  if (!PerfMapSetting() || image.functions().empty()) return;",
     "  if (image.functions().empty()) return;",
     "perf_map_only_when_asked"),
    ("perf map: every function listed with size zero",
     "core/engine/elf_object.cpp",
     "{name, reinterpret_cast<const void *>(address[k]), static_cast<size_t>(sym.st_size)}",
     "{name, reinterpret_cast<const void *>(address[k]), size_t{0}}",
     "perf_map_names_every_linked_program"),
    ("environment: a 0/1 switch takes any value without a word",
     "core/support/environment.cpp",
     "  else if (std::strcmp(value, \"0\") != 0 && *value != '\\0' && error->empty())",
     "  else if (false)",
     "environment_refuses_TINYMLIR_(PERF_MAP|COMPILE_IN_PROCESS)"),
    ("environment: a switch set to 1 stays off",
     "core/support/environment.cpp",
     "  if (std::strcmp(value, \"1\") == 0)\n    *on = true;",
     "  if (std::strcmp(value, \"1\") == 0)\n    *on = false;",
     "perf_map_names_every_linked_program"),
    ("runtime: a freed temporary is never kept for the next call",
     "core/runtime/recycled_temporaries.cpp",
     "      if (r->idle_bytes + it->second.bytes <= kMaxIdleBytes) {",
     "      if (false) {",
     "RecycledTemporaries|GuardedCall"),
    ("GPU lowering: PTX calling libdevice unresolved passes silently",
     "core/targets/gpu/compile/gpu_lowering.cpp",
     "  if (!unresolved.empty() && access(libdevice.c_str(), R_OK) != 0)",
     "  if (false && !unresolved.empty() && access(libdevice.c_str(), R_OK) != 0)",
     "cli_gpu_target_without_a_toolkit_says_what_it_cannot_do"),
    ("program file: a q8_0 input that cannot hold whole blocks is let through",
     "core/engine/program_file.cpp",
     "ok = r.Type(&program->inputs[i]) && program->inputs[i].StoresWholeBlocks();",
     "ok = r.Type(&program->inputs[i]);",
     "ProgramFile.BadFilesAreRefusedWithAReason"),
    ("device seam: the GPU device copies no result back",
     "core/targets/gpu/run/gpu_device.cpp",
     "      if (c->staged_outputs[i]) {",
     "      if (c->staged_outputs[i] && false) {",
     "gpu_host_path|FakeDriver|GpuHost"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, **kw)


def configure(build):
    if not os.path.exists(os.path.join(ROOT, build, "build.ninja")):
        r = run(["scripts/build.sh", build], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            sys.exit(f"mutate: the unmutated tree does not build in {build}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build-mutate")
    ap.add_argument("--only", nargs="*", help="names (substrings) of the mutations to run")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or any(o in m[0] for o in args.only)]
    if args.list:
        for m in chosen:
            print(f"{m[0]}\n    {m[1]}; caught by: {m[4]}")
        return 0
    configure(args.build)
    env = dict(os.environ, TINYMLIR_CACHE_DIR=os.path.join(ROOT, args.build, "test-cache"))
    results = []
    for name, path, old, new, tests in chosen:
        full = os.path.join(ROOT, path)
        with open(full) as f:
            original = f.read()
        if original.count(old) != 1:
            results.append((name, "STALE (the text to mutate is not in the file once)"))
            continue
        start = time.time()
        try:
            with open(full, "w") as f:
                f.write(original.replace(old, new))
            build = run(["ninja", "-C", args.build], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            if build.returncode != 0:
                verdict = "INVALID (the mutant does not build: fix its text)"
            else:
                t = run(["ctest", "--test-dir", args.build, "-R", tests, "-j2", "--timeout", "900"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
                ran = "No tests were found" not in t.stdout
                if not ran:
                    verdict = "NO TESTS MATCH " + tests
                elif t.returncode != 0:
                    failed = [l.split("-", 1)[-1].strip() for l in t.stdout.splitlines()
                              if l.strip().startswith(tuple("0123456789")) and "(Failed)" in l]
                    verdict = "killed by " + (", ".join(failed[:3]) or tests)
                else:
                    verdict = "SURVIVED"
        finally:
            with open(full, "w") as f:
                f.write(original)
        results.append((name, f"{verdict} ({time.time() - start:.0f} s)"))
        print(f"mutate: {name}: {results[-1][1]}", flush=True)
    run(["ninja", "-C", args.build], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    print("\nmutations:")
    for name, verdict in results:
        print(f"  {verdict.split(' (')[0].split(' by ')[0]:<9} {name}: {verdict}")
    survived = [r for r in results if not r[1].startswith("killed")]
    print(f"{len(results) - len(survived)} of {len(results)} killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())

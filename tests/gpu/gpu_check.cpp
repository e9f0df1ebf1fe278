// GPU = CPU, op by op. Built twice from this file:
//   gpu_check_writer DIR  (libtinymlir.so): compiles every case for the CPU and runs it,
//                         compiles it for the GPU and exports it; writes DIR/<case>.tmp, the
//                         inputs DIR/<case>.in<i> and the CPU's outputs DIR/<case>.out<i>;
//   gpu_check DIR         (libtinymlir_runtime.so only, so it runs where there is no LLVM:
//                         the GPU machine): loads each GPU program, runs it on the same
//                         inputs and compares with the CPU's outputs.
// Tolerance: max |gpu - cpu| <= 1e-5 * max(1, max |cpu|) per output (the kernels sum in
// another order than the CPU's BLAS and loops; 1e-5 relative is what the issue asks).
// Exit status: 0 all equal, 1 a difference or an error, 2 no GPU (the message says why).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tinymlir/tinymlir.h"

namespace {

struct Case {
  const char *name;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<tm_dtype> dtypes;
};

// The basic op kinds (elementwise, reductions, softmax, layer norm, gelu, matmul, batch
// matmul, gather, a constant tensor; rows reduced by the row kernels), the products with one
// row of a decode step (the matrix-vector kernel) and with one column (the logits: the
// row-dot kernel), and products with the elementwise ops that follow them in GPT-2
// (each kernel's epilogue); the traces are in Trace() below.
const Case kCases[] = {
    {"elementwise", {{300, 257}, {257}}, {TM_F32, TM_F32}},
    {"reductions", {{64, 1000}}, {TM_F32}},
    {"softmax", {{12, 5, 77}}, {TM_F32}},
    {"layer_norm_gelu", {{33, 768}, {768}, {768}}, {TM_F32, TM_F32, TM_F32}},
    // A decode step's rows: layer norm over one row, softmax over a vocabulary's logits.
    {"decode_rows", {{1, 768}, {768}, {768}, {1, 50257}}, {TM_F32, TM_F32, TM_F32, TM_F32}},
    {"matmul_odd_sizes", {{129, 67}, {67, 301}}, {TM_F32, TM_F32}},
    {"matmul_f64", {{45, 33}, {33, 17}}, {TM_F64, TM_F64}},
    {"batch_matmul", {{12, 7, 64}, {12, 64, 19}}, {TM_F32, TM_F32}},
    {"gather", {{1000, 64}, {37}}, {TM_F32, TM_I32}},
    {"constant_tensor", {{300, 4}}, {TM_F32}},
    {"matvec", {{1, 256}, {256, 2304}}, {TM_F32, TM_F32}},  // one row: a decode step's
    {"batch_matvec", {{12, 1, 64}, {12, 64, 200}}, {TM_F32, TM_F32}},
    {"matvec_deep", {{1, 3072}, {3072, 96}}, {TM_F32, TM_F32}},  // the MLP projection's depth
    {"row_dots", {{1001, 768}, {768, 1}}, {TM_F32, TM_F32}},     // one column: the logits
    {"batch_row_dots", {{3, 50, 33}, {3, 33, 1}}, {TM_F32, TM_F32}},
    // Elementwise ops after a product: the product kernel's epilogue.
    {"matmul_bias_gelu", {{129, 67}, {67, 301}, {301}}, {TM_F32, TM_F32, TM_F32}},
    {"matvec_residual", {{1, 768}, {768, 768}, {1, 768}}, {TM_F32, TM_F32, TM_F32}},
    {"batch_matvec_masked", {{12, 1, 64}, {12, 64, 200}, {1, 200}}, {TM_F32, TM_F32, TM_F32}},
    // Every unary op of the library's table (tm_op_unary), summed: one op lowered wrongly
    // moves the sum by about its own size.
    {"every_unary_op", {{300, 257}}, {TM_F32}},
};

size_t DtypeBytes(tm_dtype d) { return d == TM_F64 || d == TM_I64 ? 8 : d == TM_BOOL ? 1 : 4; }

int64_t Elements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool WriteBytes(const std::string &path, const std::vector<char> &bytes) {
  FILE *f = std::fopen(path.c_str(), "wb");
  bool ok = f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (f) ok = std::fclose(f) == 0 && ok;
  return ok;
}

bool ReadBytes(const std::string &path, std::vector<char> *bytes) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  bool ok = std::fread(bytes->data(), 1, bytes->size(), f) == bytes->size();
  std::fclose(f);
  return ok;
}

// Deterministic inputs: values in [-1, 1]; indices in [0, rows of input 0).
std::vector<char> MakeInput(const Case &c, size_t i) {
  const int64_t n = Elements(c.shapes[i]);
  std::vector<char> bytes(static_cast<size_t>(n) * DtypeBytes(c.dtypes[i]));
  uint32_t s = 1234u + static_cast<uint32_t>(i) * 77u;
  for (int64_t k = 0; k < n; ++k) {
    s = s * 1103515245u + 12345u;
    const double v = static_cast<double>((s >> 8) % 20001) / 10000.0 - 1.0;
    if (c.dtypes[i] == TM_F32) reinterpret_cast<float *>(bytes.data())[k] = static_cast<float>(v);
    if (c.dtypes[i] == TM_F64) reinterpret_cast<double *>(bytes.data())[k] = v;
    if (c.dtypes[i] == TM_I32)
      reinterpret_cast<int32_t *>(bytes.data())[k] = static_cast<int32_t>((s >> 8) % c.shapes[0][0]);
  }
  return bytes;
}

std::vector<tm_tensor> Tensors(tm_program *p, bool inputs, std::vector<std::vector<char>> *data,
                               std::vector<std::vector<int64_t>> *shapes) {
  const int32_t n = inputs ? tm_program_num_inputs(p) : tm_program_num_outputs(p);
  std::vector<tm_tensor> tensors;
  shapes->assign(n, std::vector<int64_t>(TM_MAX_RANK));
  if (!inputs) data->assign(n, {});
  for (int32_t i = 0; i < n; ++i) {
    tm_dtype dtype;
    int32_t rank = 0;
    (inputs ? tm_program_input_type : tm_program_output_type)(p, i, &dtype, &rank,
                                                               (*shapes)[i].data());
    (*shapes)[i].resize(rank);
    if (!inputs) (*data)[i].assign(static_cast<size_t>(Elements((*shapes)[i])) * DtypeBytes(dtype), 0);
    tensors.push_back({(*data)[i].data(), dtype, rank, (*shapes)[i].data(), nullptr});
  }
  return tensors;
}

#ifdef GPU_CHECK_WRITER
tm_value Trace(tm_trace *t, const Case &c, const std::vector<tm_value> &v, tm_value *second) {
  tm_value r = 0, a = 0, b = 0;
  *second = 0;
  const std::string name = c.name;
  if (name == "elementwise") {
    tm_op_mul(t, v[0], v[1], &a);
    tm_op_tanh(t, a, &r);
  } else if (name == "every_unary_op") {  // on |x| / 10 + 0.5: inside every op's domain, O(1)
    tm_value tenth = 0, half = 0, x = 0;
    tm_op_scalar(t, TM_F32, 0.1, &tenth);
    tm_op_scalar(t, TM_F32, 0.5, &half);
    tm_op_abs(t, v[0], &a);
    tm_op_mul(t, a, tenth, &b);
    tm_op_add(t, b, half, &x);
    for (int op = 0; op < tm_unary_op_count(); ++op) {
      tm_value y = 0;
      tm_op_unary(t, static_cast<tm_unary_op>(op), x, &y);
      if (op == 0) {
        r = y;
      } else {
        tm_value sum = 0;
        tm_op_add(t, r, y, &sum);
        r = sum;
      }
    }
  } else if (name == "reductions") {
    tm_op_reduce_sum(t, v[0], 1, 0, &r);
    tm_op_reduce_max(t, v[0], 0, 0, second);
  } else if (name == "softmax") {
    tm_op_softmax(t, v[0], -1, &r);
  } else if (name == "layer_norm_gelu") {
    tm_op_layer_norm(t, v[0], v[1], v[2], 1e-5, &a);
    tm_op_gelu_tanh(t, a, &r);
  } else if (name == "decode_rows") {
    tm_op_layer_norm(t, v[0], v[1], v[2], 1e-5, &r);
    tm_op_softmax(t, v[3], -1, second);
  } else if (name == "gather") {
    tm_op_gather(t, v[0], v[1], &r);
  } else if (name == "constant_tensor") {  // read from the program's own data
    static const float kTable[4] = {0.5f, -2.0f, 3.0f, 0.25f};
    static const int64_t kShape[1] = {4};
    const tm_tensor table = {const_cast<float *>(kTable), TM_F32, 1, kShape, nullptr};
    tm_op_constant(t, &table, &a);
    tm_op_mul(t, v[0], a, &r);
  } else if (name == "matmul_bias_gelu") {
    tm_op_matmul(t, v[0], v[1], &a);
    tm_op_add(t, a, v[2], &b);
    tm_op_gelu_tanh(t, b, &r);
  } else if (name == "matvec_residual") {  // the product is an output too
    tm_op_matmul(t, v[0], v[1], &r);
    tm_op_add(t, v[2], r, second);
  } else if (name == "batch_matvec_masked") {
    tm_value scale = 0, scaled = 0;
    tm_op_matmul(t, v[0], v[1], &a);
    tm_op_scalar(t, TM_F32, 0.125, &scale);
    tm_op_mul(t, a, scale, &scaled);
    tm_op_add(t, scaled, v[2], &r);
  } else {
    tm_op_matmul(t, v[0], v[1], &r);
  }
  return r;
}

int Write(const std::string &dir) {
  tm_context *ctx = nullptr;
  if (tm_context_create(&ctx) != TM_OK) return std::fprintf(stderr, "%s\n", tm_last_error()), 1;
  int errors = 0;
  for (const Case &c : kCases) {
    tm_trace *t = nullptr;
    std::vector<tm_value> in(c.shapes.size());
    tm_trace_begin(ctx, c.name, &t);
    for (size_t i = 0; i < c.shapes.size(); ++i)
      tm_op_input(t, c.dtypes[i], static_cast<int32_t>(c.shapes[i].size()), c.shapes[i].data(), &in[i]);
    tm_value second = 0, first = Trace(t, c, in, &second);
    tm_value outs[2] = {first, second};
    tm_program *cpu = nullptr, *gpu = nullptr;
    tm_compile_options o;
    tm_compile_options_init(&o);
    bool ok = tm_trace_end(t, outs, second ? 2 : 1) == TM_OK &&
              tm_compile(ctx, t, &o, &cpu) == TM_OK;
    o.target = TM_TARGET_GPU;
    ok = ok && tm_compile(ctx, t, &o, &gpu) == TM_OK &&
         tm_program_export(gpu, (dir + "/" + c.name + ".tmp").c_str()) == TM_OK;
    std::vector<std::vector<char>> in_data, out_data;
    std::vector<std::vector<int64_t>> in_shapes, out_shapes;
    for (size_t i = 0; ok && i < c.shapes.size(); ++i) {
      in_data.push_back(MakeInput(c, i));
      ok = WriteBytes(dir + "/" + c.name + ".in" + std::to_string(i), in_data.back());
    }
    if (ok) {
      std::vector<tm_tensor> ins = Tensors(cpu, true, &in_data, &in_shapes);
      std::vector<tm_tensor> outs_t = Tensors(cpu, false, &out_data, &out_shapes);
      ok = tm_invoke(cpu, ins.data(), static_cast<int32_t>(ins.size()), outs_t.data(),
                     static_cast<int32_t>(outs_t.size())) == TM_OK;
      for (size_t i = 0; ok && i < out_data.size(); ++i)
        ok = WriteBytes(dir + "/" + c.name + ".out" + std::to_string(i), out_data[i]);
    }
    if (!ok) {
      std::fprintf(stderr, "%s: %s\n", c.name, tm_last_error());
      ++errors;
    }
    tm_program_release(cpu);
    tm_program_release(gpu);
    tm_trace_destroy(t);
  }
  tm_context_release(ctx);
  std::printf("wrote %zu cases to %s (%d errors)\n", sizeof kCases / sizeof kCases[0],
              dir.c_str(), errors);
  return errors ? 1 : 0;
}
#endif

// max |a - b| / max(1, max |b|) over one output.
double Difference(const std::vector<char> &got, const std::vector<char> &want, tm_dtype dtype) {
  double diff = 0, scale = 1;
  const size_t n = got.size() / DtypeBytes(dtype);
  for (size_t i = 0; i < n; ++i) {
    double a, b;
    if (dtype == TM_F64) {
      a = reinterpret_cast<const double *>(got.data())[i];
      b = reinterpret_cast<const double *>(want.data())[i];
    } else if (dtype == TM_F32) {
      a = reinterpret_cast<const float *>(got.data())[i];
      b = reinterpret_cast<const float *>(want.data())[i];
    } else {
      return std::memcmp(got.data(), want.data(), got.size()) == 0 ? 0.0 : INFINITY;
    }
    if (!(std::fabs(a - b) <= diff)) diff = std::fabs(a - b);  // NaN-safe
    scale = std::fmax(scale, std::fabs(b));
  }
  return diff / scale;
}

int Check(const std::string &dir) {
  int failures = 0;
  for (const Case &c : kCases) {
    tm_program *p = nullptr;
    if (tm_program_load((dir + "/" + c.name + ".tmp").c_str(), &p) != TM_OK) {
      std::printf("FAIL %-20s load: %s\n", c.name, tm_last_error());
      ++failures;
      continue;
    }
    std::vector<std::vector<char>> in_data, out_data, want;
    std::vector<std::vector<int64_t>> in_shapes, out_shapes;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      in_data.push_back(MakeInput(c, i));
      std::vector<char> stored(in_data.back().size());
      if (!ReadBytes(dir + "/" + c.name + ".in" + std::to_string(i), &stored) || stored != in_data.back())
        std::printf("note %-20s input %zu differs from the writer's\n", c.name, i);
    }
    std::vector<tm_tensor> ins = Tensors(p, true, &in_data, &in_shapes);
    std::vector<tm_tensor> outs = Tensors(p, false, &out_data, &out_shapes);
    const tm_status s = tm_invoke(p, ins.data(), static_cast<int32_t>(ins.size()), outs.data(),
                                  static_cast<int32_t>(outs.size()));
    if (s == TM_ERROR_UNSUPPORTED && std::strstr(tm_last_error(), "CUDA")) {
      std::printf("no GPU: %s\n", tm_last_error());
      tm_program_release(p);
      return 2;
    }
    double worst = 0;
    bool ok = s == TM_OK;
    for (size_t i = 0; ok && i < outs.size(); ++i) {
      std::vector<char> cpu(out_data[i].size());
      ok = ReadBytes(dir + "/" + c.name + ".out" + std::to_string(i), &cpu);
      if (ok) worst = std::fmax(worst, Difference(out_data[i], cpu, outs[i].dtype));
    }
    ok = ok && worst <= 1e-5;
    std::printf("%s %-20s max |gpu - cpu| / max(1, |cpu|) = %.3g%s%s\n", ok ? "ok  " : "FAIL",
                c.name, worst, s == TM_OK ? "" : ": ", s == TM_OK ? "" : tm_last_error());
    failures += ok ? 0 : 1;
    tm_program_release(p);
  }
  std::printf("%d of %zu cases equal to the CPU within 1e-5\n",
              static_cast<int>(sizeof kCases / sizeof kCases[0]) - failures,
              sizeof kCases / sizeof kCases[0]);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 1;
  }
#ifdef GPU_CHECK_WRITER
  return Write(argv[1]);
#else
  return Check(argv[1]);
#endif
}

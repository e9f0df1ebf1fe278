// The op table through the C API: tm_op_count and tm_op_signature list every row of the
// generated header, and tm_op checks each call's counts against the row's signature before
// the op sees it, with a message naming the op, its signature and what it got; a refused
// call records nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tinymlir/tinymlir.h"

namespace {

class OpTable : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(tm_context_create(&ctx_), TM_OK) << tm_last_error();
    ASSERT_EQ(tm_trace_begin(ctx_, "op_table", &trace_), TM_OK) << tm_last_error();
    const int64_t shape[] = {2, 3};
    ASSERT_EQ(tm_op_input(trace_, TM_F32, 2, shape, &x_), TM_OK) << tm_last_error();
  }
  void TearDown() override {
    tm_trace_destroy(trace_);
    tm_context_release(ctx_);
  }

  // tm_op's status and, on failure, its message.
  tm_status Op(tm_op_kind kind, std::vector<tm_value> operands, std::vector<int64_t> ints,
               std::string *error, double real = 0) {
    tm_value out = 0;
    const tm_status s = tm_op(trace_, kind, operands.data(), static_cast<int32_t>(operands.size()),
                              ints.data(), static_cast<int32_t>(ints.size()), real, &out);
    *error = s == TM_OK ? "" : tm_last_error();
    return s;
  }

  tm_context *ctx_ = nullptr;
  tm_trace *trace_ = nullptr;
  tm_value x_ = 0;
};

TEST(OpTableRows, EveryRowOfTheHeaderHasItsSignature) {
  ASSERT_GE(tm_op_count(), TM_OP_CAUSAL_MASK + 1);
  const std::pair<tm_op_kind, const char *> known[] = {
      {TM_OP_ADD, "add(a, b)"},
      {TM_OP_REDUCE_SUM, "reduce_sum(x, axis: int, keepdims: bool = 0)"},
      {TM_OP_SLICE, "slice(x, begin: ints, end: ints)"},
      {TM_OP_CONCAT, "concat(xs: values, axis: int = 0)"},
      {TM_OP_CAUSAL_MASK,
       "causal_mask(rows: int, cols: int, offset: int = 0, dtype: dtype = f32)"}};
  for (const auto &[kind, signature] : known) EXPECT_STREQ(tm_op_signature(kind), signature);
  for (int32_t k = 0; k < tm_op_count(); ++k) {
    const char *s = tm_op_signature(static_cast<tm_op_kind>(k));
    ASSERT_NE(s, nullptr) << "op " << k;
    EXPECT_NE(std::string(s).find('('), std::string::npos) << s;
  }
  EXPECT_EQ(tm_op_signature(static_cast<tm_op_kind>(tm_op_count())), nullptr);
  EXPECT_EQ(tm_op_signature(static_cast<tm_op_kind>(-1)), nullptr);
}

TEST_F(OpTable, AnUnknownKindIsRefusedNamingTheRange) {
  std::string e;
  EXPECT_EQ(Op(static_cast<tm_op_kind>(tm_op_count()), {x_}, {}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(e.find("tm_op: unknown op " + std::to_string(tm_op_count())), std::string::npos) << e;
  EXPECT_NE(e.find("0.." + std::to_string(tm_op_count() - 1)), std::string::npos) << e;
  EXPECT_EQ(Op(static_cast<tm_op_kind>(-3), {x_}, {}, &e), TM_ERROR_INVALID_ARGUMENT);
}

TEST_F(OpTable, ValueCountsAreCheckedAgainstTheSignature) {
  std::string e;
  EXPECT_EQ(Op(TM_OP_ADD, {x_}, {}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(e, "tm_op(add): add(a, b) takes 2 values, got 1");
  EXPECT_EQ(Op(TM_OP_ADD, {x_, x_, x_}, {}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(e, "tm_op(add): add(a, b) takes 2 values, got 3");
  EXPECT_EQ(Op(TM_OP_CONCAT, {}, {0}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(e.find("takes one or more values, got 0"), std::string::npos) << e;
  EXPECT_EQ(Op(TM_OP_CAUSAL_MASK, {x_}, {2, 2, 0, TM_F32}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(e.find("takes 0 values, got 1"), std::string::npos) << e;
}

TEST_F(OpTable, IntegerCountsAreCheckedAgainstTheSignature) {
  std::string e;
  EXPECT_EQ(Op(TM_OP_REDUCE_SUM, {x_}, {1}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(e, "tm_op(reduce_sum): reduce_sum(x, axis: int, keepdims: bool = 0) takes 2 "
               "integer attributes (axis, keepdims), got 1 integers");
  EXPECT_EQ(Op(TM_OP_ADD, {x_, x_}, {0}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(e.find("takes 0 integer attributes"), std::string::npos) << e;
  // Two lists of one length each: an odd count cannot be split.
  EXPECT_EQ(Op(TM_OP_SLICE, {x_}, {0, 0, 1}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(e.find("2 equally long lists (begin, end)"), std::string::npos) << e;
  // A list as long as the rank is the op's to check, and it does.
  EXPECT_EQ(Op(TM_OP_SLICE, {x_}, {0, 1}, &e), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(e.find("tm_op(slice)"), std::string::npos) << e;
  EXPECT_EQ(Op(TM_OP_SLICE, {x_}, {0, 0, 1, 2}, &e), TM_OK) << e;
}

TEST_F(OpTable, NullArraysAndNegativeCountsAreRefused) {
  tm_value out;
  EXPECT_EQ(tm_op(trace_, TM_OP_ADD, nullptr, 2, nullptr, 0, 0, &out), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("tm_op(add): operands or ints is NULL"),
            std::string::npos)
      << tm_last_error();
  const tm_value xs[] = {x_, x_};
  EXPECT_EQ(tm_op(trace_, TM_OP_ADD, xs, -1, nullptr, 0, 0, &out), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_op(trace_, TM_OP_REDUCE_SUM, xs, 1, nullptr, 2, 0, &out),
            TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_op(trace_, TM_OP_ADD, xs, 2, nullptr, 0, 0, nullptr), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_op(nullptr, TM_OP_ADD, xs, 2, nullptr, 0, 0, &out), TM_ERROR_INVALID_ARGUMENT);
}

TEST_F(OpTable, TheGenericEntryAndTheNamedOneRecordTheSameOp) {
  std::string e;
  tm_value by_kind = 0, by_name = 0;
  const tm_value xs[] = {x_, x_};
  ASSERT_EQ(tm_op(trace_, TM_OP_MUL, xs, 2, nullptr, 0, 0, &by_kind), TM_OK) << tm_last_error();
  ASSERT_EQ(tm_op_mul(trace_, x_, x_, &by_name), TM_OK) << tm_last_error();
  tm_dtype d1, d2;
  int32_t r1 = 0, r2 = 0;
  int64_t s1[TM_MAX_RANK], s2[TM_MAX_RANK];
  ASSERT_EQ(tm_value_type(trace_, by_kind, &d1, &r1, s1), TM_OK);
  ASSERT_EQ(tm_value_type(trace_, by_name, &d2, &r2, s2), TM_OK);
  EXPECT_EQ(d1, d2);
  ASSERT_EQ(r1, 2);
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(s1[0], s2[0]);
  EXPECT_EQ(s1[1], s2[1]);
  // Shape errors name the entry the caller used.
  const int64_t other[] = {4, 3};
  tm_value y;
  ASSERT_EQ(tm_op_input(trace_, TM_F32, 2, other, &y), TM_OK);
  EXPECT_EQ(Op(TM_OP_ADD, {x_, y}, {}, &e), TM_ERROR_SHAPE);
  EXPECT_EQ(e.rfind("tm_op(add): ", 0), 0u) << e;
  EXPECT_EQ(tm_op_add(trace_, x_, y, &by_name), TM_ERROR_SHAPE);
  EXPECT_EQ(std::string(tm_last_error()).rfind("tm_op_add: ", 0), 0u) << tm_last_error();
}

TEST_F(OpTable, ARefusedCallRecordsNothing) {
  std::string e;
  // Refused calls between two recorded ones: the values' ids stay consecutive.
  tm_value first, second;
  const tm_value xs[] = {x_, x_};
  ASSERT_EQ(tm_op(trace_, TM_OP_ADD, xs, 2, nullptr, 0, 0, &first), TM_OK);
  EXPECT_NE(Op(TM_OP_ADD, {x_}, {}, &e), TM_OK);
  EXPECT_NE(Op(TM_OP_REDUCE_SUM, {x_}, {5, 0}, &e), TM_OK);
  EXPECT_NE(Op(TM_OP_SLICE, {x_}, {0, 0, 3, 3}, &e), TM_OK);
  ASSERT_EQ(tm_op(trace_, TM_OP_ADD, xs, 2, nullptr, 0, 0, &second), TM_OK);
  EXPECT_EQ(second, first + 1);
}

}  // namespace

#include "core/trace/ops.h"

#include <cstdlib>
#include <cstring>

#include "core/support/fork_safe_once.h"

namespace tinymlir {

// The rules (op_rules.cpp), one declaration per row.
#define TM_OP(Name, C_ENUMERATOR, c_value, signature, doc, rule, lowering, bound) \
  Status Rule##rule(Trace &trace, const OpCall &call, ValueId *out);
#include "core/trace/ops.def"
#undef TM_OP

namespace {

std::string Trim(const std::string &s) {
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Fills the parsed fields of `row` from its signature; aborts on a malformed one (a row of
// the table, checked by every test run).
void Parse(OpRow *row) {
  const std::string signature = row->signature;
  const size_t open = signature.find('('), close = signature.rfind(')');
  if (open == std::string::npos || close != signature.size() - 1) std::abort();
  row->name = signature.substr(0, open);
  const std::string list = signature.substr(open + 1, close - open - 1);
  size_t at = 0;
  while (at < list.size()) {
    const size_t comma = list.find(',', at);
    const std::string item = Trim(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    at = comma == std::string::npos ? list.size() : comma + 1;
    OpParameter p;
    const size_t colon = item.find(':'), equals = item.find('=');
    p.name = Trim(item.substr(0, std::min(colon, equals)));
    if (equals != std::string::npos) p.default_text = Trim(item.substr(equals + 1));
    const std::string kind =
        colon == std::string::npos ? "" : Trim(item.substr(colon + 1, equals == std::string::npos
                                                                          ? std::string::npos
                                                                          : equals - colon - 1));
    if (kind.empty()) p.kind = OpParameter::kValue;
    else if (kind == "values") p.kind = OpParameter::kValues;
    else if (kind == "int") p.kind = OpParameter::kInt;
    else if (kind == "bool") p.kind = OpParameter::kBool;
    else if (kind == "dtype") p.kind = OpParameter::kDtype;
    else if (kind == "ints") p.kind = OpParameter::kInts;
    else if (kind == "real") p.kind = OpParameter::kReal;
    else std::abort();
    row->parameters.push_back(p);
  }
  row->value_parameters = row->scalar_attributes = row->list_attributes = 0;
  row->variadic = row->has_real = false;
  for (const OpParameter &p : row->parameters) {
    switch (p.kind) {
      case OpParameter::kValue: ++row->value_parameters; break;
      case OpParameter::kValues: row->variadic = true; break;
      case OpParameter::kInt:
      case OpParameter::kBool:
      case OpParameter::kDtype: ++row->scalar_attributes; break;
      case OpParameter::kInts: ++row->list_attributes; break;
      case OpParameter::kReal: row->has_real = true; break;
    }
  }
}

ForkSafeOnce<const std::vector<OpRow> *> rows;

// The attributes a row takes, for messages: "axis (int), keepdims (bool)".
std::string AttributeNames(const OpRow &row) {
  std::string names;
  for (const OpParameter &p : row.parameters)
    if (p.kind != OpParameter::kValue && p.kind != OpParameter::kValues &&
        p.kind != OpParameter::kReal)
      names += (names.empty() ? "" : ", ") + p.name;
  return names.empty() ? "none" : names;
}

}  // namespace

const std::vector<OpRow> &OpRows() {
  return *rows.Get([] {
    auto *list = new std::vector<OpRow>{
#define TM_OP(Name, C_ENUMERATOR, c_value, signature, doc, rule, lowering, bound)           \
  OpRow{OpKind::k##Name, c_value, signature, doc, &Rule##rule,                              \
        std::strcmp(#lowering, "Expanded") == 0, OpBound::bound, {}, {}, 0, 0, 0, false, false},
#include "core/trace/ops.def"
#undef TM_OP
    };
    for (size_t i = 0; i < list->size(); ++i) {
      // C values are the table's positions: tm_op_count() bounds them, append only.
      if ((*list)[i].c_value != static_cast<int>(i)) std::abort();
      Parse(&(*list)[i]);
    }
    return list;
  });
}

const OpRow *FindOp(OpKind kind) {
  for (const OpRow &row : OpRows())
    if (row.kind == kind) return &row;
  return nullptr;
}

const OpRow *FindOpByC(int c_value) {
  if (c_value < 0 || static_cast<size_t>(c_value) >= OpRows().size()) return nullptr;
  return &OpRows()[c_value];
}

Status RecordOp(Trace &trace, const OpCall &call, ValueId *out) {
  const OpRow *row = FindOp(call.kind);
  if (!row) return InvalidArgument(std::string(call.op) + ": not an op of the table");
  const size_t n_values = call.values.size(), n_ints = call.ints.size();
  if (row->variadic ? n_values < 1 : n_values != row->value_parameters)
    return InvalidArgument(std::string(call.op) + ": " + row->signature + " takes " +
                           (row->variadic ? "one or more values"
                                          : std::to_string(row->value_parameters) +
                                                (row->value_parameters == 1 ? " value" : " values")) +
                           ", got " + std::to_string(n_values));
  const size_t lists = row->list_attributes, scalars = row->scalar_attributes;
  const bool counted = lists == 0 ? n_ints == scalars
                                  : n_ints >= scalars && (n_ints - scalars) % lists == 0;
  if (!counted)
    return InvalidArgument(std::string(call.op) + ": " + row->signature + " takes " +
                           std::to_string(scalars) + " integer attribute" +
                           (scalars == 1 ? "" : "s") +
                           (lists ? " and " + std::to_string(lists) + " equally long list" +
                                        (lists == 1 ? "" : "s")
                                  : std::string()) +
                           " (" + AttributeNames(*row) + "), got " + std::to_string(n_ints) +
                           " integers");
  return row->rule(trace, call, out);
}

}  // namespace tinymlir

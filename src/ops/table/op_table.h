// The op table (DESIGN.md "The op table"): every op is one row of op_table.def. OpId is the op's
// identity everywhere above the kernels: the dispatch stages (ops/op_scope.h), the derivative
// registry (an array indexed by OpId in src/autograd), the autocast policy (a column of the row),
// the view list, the tracer's records and the tests. Nothing keys an op by its name; the name is for
// people (errors, profiles, graph dumps) and for parsing a dumped graph back (op_from_name).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "ops/table/op_attrs.h"

namespace tessera {

enum class OpId : uint16_t {
#define TS_OP(name, family, kind, autocast, grad, attrs) name,
#include "ops/table/op_table.def"
#undef TS_OP
};

inline constexpr int kNumOps = 0
#define TS_OP(name, family, kind, autocast, grad, attrs) +1
#include "ops/table/op_table.def"
#undef TS_OP
    ;

enum class OpFamily : uint8_t {
  Copy, View, Pointwise, Softmax, Reduce, Linalg, Shape, Index, Sort, Conv, Pool, Norm, BatchNorm,
  Attention, Loss, Fused, Random, Factory, Foreach,
};
enum class OpKind : uint8_t { Functional, View, InPlace, Out, Factory };
// Note [Autocast stage]: what autocast does to an op's floating inputs (src/amp applies it).
enum class AutocastPolicy : uint8_t { None, Lower, Float32, Promote };
enum class OpGrad : uint8_t { None, Formula, Composite };

struct OpInfo {
  OpId id;
  const char* name;
  OpFamily family;
  OpKind kind;
  AutocastPolicy autocast;
  OpGrad grad;
  AttrsKind attrs;
};

namespace detail {
inline constexpr OpInfo kOpTable[] = {
#define TS_OP(name, family, kind, autocast, grad, attrs) \
  {OpId::name, #name, OpFamily::family, OpKind::kind, AutocastPolicy::autocast, OpGrad::grad, AttrsKind::attrs},
#include "ops/table/op_table.def"
#undef TS_OP
};
}  // namespace detail

constexpr const OpInfo& op_info(OpId id) { return detail::kOpTable[static_cast<int>(id)]; }
constexpr const char* op_name(OpId id) { return op_info(id).name; }
constexpr bool is_view_op(OpId id) { return op_info(id).kind == OpKind::View; }
constexpr AutocastPolicy autocast_policy(OpId id) { return op_info(id).autocast; }

// The row whose name is `name` (graph parsing, tests); nullopt for an unknown name.
std::optional<OpId> op_from_name(std::string_view name);
const char* op_family_name(OpFamily f);
const char* op_kind_name(OpKind k);

}  // namespace tessera

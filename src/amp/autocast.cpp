// Autocast: the per-thread state behind amp::autocast, the policy table, the cast cache, and the
// stage the op layer calls (Note [Autocast stage], ops/autocast_hook.h).
//
// Policy (PyTorch's autocast_mode.cpp lists, one for every device type): the autocast column of the op
// table (ops/table/op_table.def).
// - LowerPrecision: eligible inputs are cast to the autocast dtype (float16 / bfloat16).
// - Float32: eligible inputs are cast to float32. Ops with a dtype argument (sum, prod, cumsum,
//   cumprod, softmax, log_softmax) are only autocast when no dtype is given (PyTorch's
//   fp32_set_opt_dtype); the op checks that before calling the stage.
// - Promote: when the eligible inputs mix float types, all go to the widest (float32); float64
//   inputs are left to the op's own type promotion.
// Eligible: a defined floating tensor, not float64, on the device type the op runs on (CUDA when any
// input is on CUDA: a CPU scalar tensor may ride along, as in PyTorch's dispatch).
//
// Cast cache: the low-precision cast of a float32 leaf that requires grad (a parameter) is made once
// per outermost autocast scope of the thread and reused, so a weight used by several ops (or several
// timesteps) is converted once and every use shares one autograd node. Only casts made with grad
// mode on are cached (a cast made under no_grad has no history to share). The entry holds the
// source tensor, so its address cannot be reused by another tensor while the entry lives.
#include <unordered_map>

#include "amp/amp_stage.h"
#include "ops/autocast_hook.h"
#include "runtime/grad_mode.h"
#include "tessera/amp.h"

namespace tessera::amp {
namespace {

struct DeviceTypeState {
  bool enabled = false;
  DType dtype = kBFloat16;
};

struct CacheEntry {
  Tensor source;
  Tensor cast;
};

struct ThreadState {
  DeviceTypeState device[kNumDeviceTypes] = {{false, kBFloat16}, {false, kFloat16}, {false, kBFloat16}};
  int nesting = 0;
  bool cache_enabled = true;
  std::unordered_map<const void*, CacheEntry> cache;
};

ThreadState& tls() {
  thread_local ThreadState state;
  return state;
}

DType default_dtype(DeviceType t) { return t == DeviceType::CUDA ? kFloat16 : kBFloat16; }

void sync_mask(const ThreadState& s) {
  uint32_t mask = 0;
  for (int d = 0; d < kNumDeviceTypes; ++d)
    if (s.device[d].enabled) mask |= 1u << d;
  set_autocast_device_mask(mask);
}

bool eligible(const Tensor& t, DeviceType type) {
  return t.defined() && t.device().type() == type && is_floating_point(t.dtype()) && t.dtype() != kFloat64;
}

Tensor cached_cast(ThreadState& s, const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  const bool can_cache = s.cache_enabled && to != kFloat32 && t.dtype() == kFloat32 && is_grad_enabled() &&
                         t.requires_grad() && t.is_leaf();
  if (!can_cache) return t.to(to);
  auto it = s.cache.find(t.impl());
  if (it != s.cache.end() && it->second.cast.dtype() == to) return it->second.cast;
  Tensor cast = t.to(to);
  s.cache[t.impl()] = CacheEntry{t, cast};
  return cast;
}

class Stage final : public AutocastStage {
 public:
  bool cast_inputs(OpId op, std::vector<Tensor>& inputs) override {
    ThreadState& s = tls();
    DeviceType type = DeviceType::CPU;
    bool any = false;
    for (const Tensor& t : inputs) {
      if (!t.defined()) continue;
      if (!any || t.device().type() != DeviceType::CPU) type = t.device().type();
      any = true;
      if (type != DeviceType::CPU) break;
    }
    if (!any || !s.device[static_cast<int>(type)].enabled) return false;
    const DType low = s.device[static_cast<int>(type)].dtype;
    switch (autocast_policy(op)) {
      case AutocastPolicy::None:
        return false;
      case AutocastPolicy::Lower:
        for (Tensor& t : inputs)
          if (eligible(t, type)) t = cached_cast(s, t, low);
        break;
      case AutocastPolicy::Float32:
        for (Tensor& t : inputs)
          if (eligible(t, type) && t.dtype() != kFloat32) t = t.to(kFloat32);
        break;
      case AutocastPolicy::Promote: {
        DType widest = low;
        for (const Tensor& t : inputs)
          if (eligible(t, type) && t.dtype() != widest) widest = kFloat32;  // float32, or two low types
        for (Tensor& t : inputs)
          if (eligible(t, type)) t = cached_cast(s, t, widest);
        break;
      }
    }
    return true;
  }
};

}  // namespace

void install_autocast_stage() {
  static Stage stage;
  set_autocast_stage(&stage);
}

autocast::autocast(Device device, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : type_(device.type()) {
  TS_CHECK(type_ != DeviceType::Meta, ValueError,
           "autocast: device type 'meta' has no autocast; expected 'cpu' or 'cuda'");
  const DType d = dtype.value_or(default_dtype(type_));
  if (enabled)
    TS_CHECK(d == kFloat16 || d == kBFloat16, ValueError, "autocast: in ", device_type_name(type_),
             " autocast the supported dtypes are float16 and bfloat16, got ", dtype_name(d));
  ThreadState& s = tls();
  DeviceTypeState& st = s.device[static_cast<int>(type_)];
  prev_enabled_ = st.enabled;
  prev_dtype_ = st.dtype;
  prev_cache_enabled_ = s.cache_enabled;
  st.enabled = enabled;
  if (enabled) st.dtype = d;
  s.cache_enabled = cache_enabled;
  ++s.nesting;
  sync_mask(s);
}

autocast::~autocast() {
  ThreadState& s = tls();
  DeviceTypeState& st = s.device[static_cast<int>(type_)];
  st.enabled = prev_enabled_;
  st.dtype = prev_dtype_;
  s.cache_enabled = prev_cache_enabled_;
  if (--s.nesting == 0) s.cache.clear();
  sync_mask(s);
}

bool is_autocast_enabled(DeviceType type) { return tls().device[static_cast<int>(type)].enabled; }
bool is_autocast_enabled(Device device) { return is_autocast_enabled(device.type()); }
DType get_autocast_dtype(DeviceType type) { return tls().device[static_cast<int>(type)].dtype; }
DType get_autocast_dtype(Device device) { return get_autocast_dtype(device.type()); }
bool is_autocast_cache_enabled() { return tls().cache_enabled; }
void clear_autocast_cache() { tls().cache.clear(); }
size_t autocast_cache_size() { return tls().cache.size(); }

std::optional<CastPolicy> autocast_policy(const std::string& op) {
  const std::optional<OpId> id = op_from_name(op);
  if (!id) return std::nullopt;
  switch (tessera::autocast_policy(*id)) {
    case AutocastPolicy::Lower: return CastPolicy::LowerPrecision;
    case AutocastPolicy::Float32: return CastPolicy::Float32;
    case AutocastPolicy::Promote: return CastPolicy::Promote;
    case AutocastPolicy::None: break;
  }
  return std::nullopt;
}

}  // namespace tessera::amp

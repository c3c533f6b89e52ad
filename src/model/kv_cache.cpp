// KV cache memory: one allocation split into the K and V arrays of the
// group indices (K alone for the compressed MLA cache); each layer mapped
// to its pair.
#include "model/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace rf {

KVCacheDType parse_kv_cache_dtype(std::string_view text) {
  if (text == "auto") return KVCacheDType::Auto;
  if (text == "fp8" || text == "fp8_e4m3") return KVCacheDType::Fp8;
  fail("--kv-cache-dtype '", text, "': expected auto, fp8 or fp8_e4m3");
}

DType kv_element_type(const Backend& backend, KVCacheDType d) {
  if (d == KVCacheDType::Auto) return backend.kv_type();
  RF_CHECK(backend.supports_kv_type(DType::F8_E4M3), "--kv-cache-dtype fp8: the ", backend.name(),
           " backend has no 8-bit KV cache");
  return DType::F8_E4M3;
}

KVGroupLayout kv_group_layout(const ModelConfig& c) {
  std::vector<int32_t> windows(size_t(c.n_layer), 0);
  for (int32_t il = 0; il < c.n_layer; ++il) windows[size_t(il)] = c.is_swa(il) ? c.sliding_window : 0;
  // No KV of their own: recurrent layers (their state rows) and shared-KV
  // layers (they read an earlier layer's).
  std::vector<uint8_t> no_kv;
  if (!c.recurrent_layers.empty() || !c.kv_source.empty()) {
    no_kv.assign(size_t(c.n_layer), 0);
    for (int32_t il = 0; il < c.n_layer; ++il) no_kv[size_t(il)] = c.is_recurrent(il) || c.shares_kv(il);
  }
  return KVGroupLayout(std::move(windows), std::move(no_kv));
}

namespace {

// One token's K (or V) row of layer il in a cache of `type` (an 8-bit
// cache: with its scale per KV head).
// The widest KV layer's K (or V) elements and KV heads: every layer's slot
// stride in the arrays they share (KVLayer::slot_stride).
struct SlotShape {
  int32_t elems = 0, heads = 0;
};
SlotShape slot_shape(const ModelConfig& c, const KVGroupLayout& groups) {
  SlotShape s;
  for (int32_t il = 0; il < c.n_layer; ++il)
    if (groups.has_kv(il)) {
      s.elems = std::max(s.elems, c.kv_dim_of(il));
      s.heads = std::max(s.heads, c.n_head_kv_of(il));
    }
  return s;
}

}  // namespace

StateRowLayout state_row_layout(const ModelConfig& c) {
  StateRowLayout l;
  l.conv.assign(size_t(c.n_layer), -1);
  l.ssm.assign(size_t(c.n_layer), -1);
  auto aligned = [](int64_t n) { return (n + 63) / 64 * 64; };
  for (int32_t il = 0; il < c.n_layer; ++il) {
    if (!c.is_recurrent(il)) continue;
    l.conv[size_t(il)] = l.row_floats;
    l.row_floats += aligned(int64_t(c.ssm_conv_kernel - 1) * c.ssm_conv_channels());
    l.ssm[size_t(il)] = l.row_floats;
    l.row_floats += aligned(int64_t(c.ssm_v_heads) * c.ssm_head_dim * c.ssm_head_dim);
  }
  return l;
}

KVGeometry kv_geometry(const ModelConfig& c, DType type, int32_t block_size) {
  // Layers of other head sizes share the arrays: each array's rows are the
  // widest KV layer's (a narrower layer uses the front of its array).
  KVGroupLayout groups = kv_group_layout(c);
  const SlotShape slot = slot_shape(c, groups);
  size_t row = row_bytes(type, uint64_t(slot.elems));
  if (type == DType::F8_E4M3) row += sizeof(float) * size_t(slot.heads);
  KVGeometry g{std::move(groups), row, block_size, state_row_layout(c).row_bytes()};
  if (c.is_mla()) g.arrays_per_layer = 1;  // the compressed cache: K rows (c | RoPE key) only
  return g;
}

KVCache::KVCache(Backend& backend, const ModelConfig& c, const KVMemoryPlan& plan, DType type)
    : backend_(backend), groups_(plan.geometry().groups), num_blocks_(plan.num_blocks()),
      block_size_(plan.block_size()), type_(type) {
  RF_CHECK(backend.supports_kv_type(type), "the ", backend.name(), " backend has no ", dtype_name(type),
           " KV cache");
  RF_CHECK(!c.is_mla() || type != DType::F8_E4M3, "--kv-cache-dtype fp8: the compressed MLA cache (",
           c.arch, ") holds the backend's own element type only");
  const KVGeometry want = kv_geometry(c, type, block_size_);
  RF_CHECK(groups_.n_layer() == c.n_layer && groups_.group_windows() == want.groups.group_windows() &&
               groups_.group_size() == want.group_size() && plan.geometry().row_bytes == want.row_bytes &&
               plan.geometry().state_row_bytes == want.state_row_bytes &&
               plan.geometry().arrays_per_layer == want.arrays_per_layer,
           "KV cache: the memory plan was made for another model or element type");
  bytes_ = plan.total_bytes();
  memory_ = backend.alloc(bytes_, "KV cache");
  auto* base = static_cast<uint8_t*>(memory_);
  const size_t slots = size_t(num_blocks_) * size_t(block_size_);
  const SlotShape slot = slot_shape(c, groups_);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    KVLayer l;
    if (!groups_.has_kv(i)) {  // a recurrent layer (its state is in the state rows), or a shared-KV one
      layers_.push_back(c.shares_kv(i) ? layers_[size_t(c.kv_layer(i))] : l);
      continue;
    }
    const size_t elem_bytes = slots * row_bytes(type, uint64_t(slot.elems));  // each array's scales follow
    l.k = base + plan.k_offset(groups_.index_in_group(i));
    l.v = c.is_mla() ? nullptr : base + plan.v_offset(groups_.index_in_group(i));  // (MLA: K rows only)
    if (type == DType::F8_E4M3) {
      l.k_scale = reinterpret_cast<float*>(static_cast<uint8_t*>(l.k) + elem_bytes);
      l.v_scale = reinterpret_cast<float*>(static_cast<uint8_t*>(l.v) + elem_bytes);
    }
    l.type = type;
    l.num_blocks = num_blocks_;
    l.block_size = block_size_;
    l.n_kv_heads = c.n_head_kv_of(i);
    l.head_dim = c.head_dim_of(i);
    if (c.kv_dim_of(i) != slot.elems || l.n_kv_heads != slot.heads) {  // a narrower layer: the widest one's strides
      l.slot_stride = slot.elems;
      l.scale_stride = slot.heads;
    }
    layers_.push_back(l);
  }
  // The recurrent-state rows.
  const StateRowLayout rows = state_row_layout(c);
  state_layers_.assign(size_t(c.n_layer), RecurrentLayer{});
  state_rows_ = plan.state_rows();
  state_row_bytes_ = rows.row_bytes();
  if (state_rows_ == 0) return;
  state_memory_ = backend.alloc(state_bytes(), "recurrent state");
  auto* sbase = static_cast<float*>(state_memory_);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    if (!c.is_recurrent(i)) continue;
    RecurrentLayer& r = state_layers_[size_t(i)];
    r.conv = sbase + rows.conv[size_t(i)];
    r.ssm = sbase + rows.ssm[size_t(i)];
    r.row_stride = rows.row_floats;
    r.n_rows = state_rows_;
    r.conv_kernel = c.ssm_conv_kernel;
    r.conv_channels = c.ssm_conv_channels();
    r.n_k_heads = c.ssm_k_heads;
    r.n_v_heads = c.ssm_v_heads;
    r.head_k_dim = c.ssm_head_dim;
    r.head_v_dim = c.ssm_head_dim;
  }
}

KVCache::~KVCache() {
  backend_.free(memory_);
  backend_.free(state_memory_);
}

void KVCache::copy_state_row(int32_t src, int32_t dst) {
  RF_CHECK(src >= 0 && src < state_rows_ && dst >= 0 && dst < state_rows_, "state row copy ", src, " -> ", dst,
           " outside the ", state_rows_, " rows");
  auto* base = static_cast<uint8_t*>(state_memory_);
  backend_.copy_on_device(base + size_t(dst) * state_row_bytes_, base + size_t(src) * state_row_bytes_,
                          state_row_bytes_);
}

}  // namespace rf

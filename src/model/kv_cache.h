// KVCache: the device memory of the paged KV cache (and, for hybrid
// models, of the recurrent-state rows beside it), carved out of one
// allocation as kv/memory_plan lays it out: 2 * g arrays (K and V for each
// index within a KV group, kv/group_layout.h) of [num_blocks * block_size
// slots, n_kv_heads, head_dim] elements of the cache's type (an 8-bit
// cache: followed by its [slots, n_kv_heads] f32 row scales, backend.h's
// KVLayer); layer il sees the pair of its index in its group. Which sequence owns which block, in which group, is kv/'s
// business; this class only holds memory. Also the model's KV group layout
// and geometry, from its per-layer sliding windows.
// Recurrent (Gated DeltaNet) layers keep no KV; their state lives in a
// second allocation of plan.state_rows() rows, each row every recurrent
// layer's conv and delta-rule state of one sequence slot or prefix
// checkpoint (state_row_layout; backend.h RecurrentLayer), so that a row is
// copied whole in one copy.
#pragma once

#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "kv/group_layout.h"
#include "kv/memory_plan.h"
#include "model/config.h"

namespace rf {

// --kv-cache-dtype: the backend's own KV element type (f32 on the CPU, f16
// on GPUs), or 8-bit e4m3 with a scale per row (half the bytes of f16).
enum class KVCacheDType { Auto, Fp8 };
// "auto", "fp8" or "fp8_e4m3"; anything else is an error naming the value.
KVCacheDType parse_kv_cache_dtype(std::string_view text);
// The element type `d` means on `backend`; an error naming the backend when
// it has no such cache.
DType kv_element_type(const Backend& backend, KVCacheDType d);

// The model's layers grouped by attention kind (window per layer: the
// sliding window on is_swa layers, else 0); recurrent layers in no group.
KVGroupLayout kv_group_layout(const ModelConfig& c);

// Where each recurrent layer's state lies in a state row, in floats: conv
// [conv_kernel - 1, conv_channels] at conv[il], then the delta-rule state
// [v heads, head_dim, head_dim] at ssm[il] (-1 for other layers); each
// part starts on a 64-float (256-byte) boundary.
struct StateRowLayout {
  std::vector<int64_t> conv, ssm;  // [n_layer]
  int64_t row_floats = 0;          // 0: no recurrent layer
  size_t row_bytes() const { return size_t(row_floats) * sizeof(float); }
};
StateRowLayout state_row_layout(const ModelConfig& c);
// The KV geometry of a model whose cache holds `type` elements (F8_E4M3:
// with a 4-byte scale per KV head of each row).
KVGeometry kv_geometry(const ModelConfig& c, DType type, int32_t block_size);

class KVCache {
 public:
  // `plan` must have been made from kv_geometry(c, type, ...); the backend
  // must support `type` (Backend::supports_kv_type).
  KVCache(Backend& backend, const ModelConfig& c, const KVMemoryPlan& plan, DType type);
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  // Empty for recurrent layers; a shared-KV layer sees its source layer's.
  const KVLayer& layer(int32_t i) const { return layers_[size_t(i)]; }
  // Recurrent layer i's view of the state rows (empty for other layers).
  const RecurrentLayer& state_layer(int32_t i) const { return state_layers_[size_t(i)]; }
  int32_t state_rows() const { return state_rows_; }
  size_t state_row_bytes() const { return state_row_bytes_; }
  size_t state_bytes() const { return size_t(state_rows_) * state_row_bytes_; }
  // Copies state row src to row dst (every recurrent layer's part), queued
  // on the backend.
  void copy_state_row(int32_t src, int32_t dst);
  const KVGroupLayout& groups() const { return groups_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  size_t bytes() const { return bytes_; }
  DType type() const { return type_; }

 private:
  Backend& backend_;
  KVGroupLayout groups_;
  std::vector<KVLayer> layers_;
  std::vector<RecurrentLayer> state_layers_;
  void* memory_ = nullptr;
  void* state_memory_ = nullptr;
  int32_t state_rows_ = 0;
  size_t state_row_bytes_ = 0;
  int32_t num_blocks_, block_size_;
  DType type_;
  size_t bytes_ = 0;
};

}  // namespace rf

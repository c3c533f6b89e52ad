// KV memory plan: the sizing rule.
#include "kv/memory_plan.h"

#include <algorithm>

#include "core/error.h"

namespace rf {

namespace {

// The bytes for the KV blocks; `state` (the state rows' bytes) comes out of
// an explicit or device budget first.
size_t budget_bytes(const KVGeometry& g, const KVBudget& b, size_t state) {
  if (b.kv_bytes > 0) {
    RF_CHECK(b.kv_bytes > state, "the KV budget of ", b.kv_bytes, " bytes does not hold the ", b.state_rows,
             " recurrent-state rows (", state, " bytes): lower --max-num-seqs or raise the budget");
    return b.kv_bytes - state;
  }
  if (b.memory_utilization > 0) {
    const double budget = double(b.device_total) * b.memory_utilization;
    const double used = double(b.device_used) + double(kDeviceReserveBytes) + double(state);
    RF_CHECK(budget > used, "--gpu-memory-utilization ", b.memory_utilization, " leaves no room for the KV cache: ",
             used / 1e9, " GB already used of a ", budget / 1e9, " GB budget",
             state > 0 ? str(" (", double(state) / 1e9, " GB of it the recurrent-state rows)") : std::string());
    return size_t(budget - used);
  }
  RF_CHECK(b.max_seqs > 0 && b.max_model_len > 0, "KV budget: no block count, bytes or utilization, and no ",
           "sequence count and context to size it by");
  const size_t blocks_per_seq = size_t(g.groups.max_blocks_per_sequence(b.max_model_len, g.block_size, b.max_chunk));
  return std::min(size_t(b.max_seqs) * blocks_per_seq * g.bytes_per_block(), kHostDefaultMaxBytes);
}

}  // namespace

size_t KVGeometry::bytes_read(int32_t context) const {
  size_t rows = 0;
  for (int32_t g = 0; g < groups.n_groups(); ++g) {
    const int32_t w = groups.window(g);
    rows += groups.layers(g).size() * size_t(std::max(0, w > 0 ? std::min(context, w) : context));
  }
  return rows * token_bytes();
}

KVMemoryPlan::KVMemoryPlan(const KVGeometry& g, const KVBudget& budget) : geometry_(g) {
  RF_CHECK(g.arrays_per_layer == 1 || g.arrays_per_layer == 2, "KV geometry: ", g.arrays_per_layer,
           " arrays per layer");
  RF_CHECK(g.group_size() > 0 && g.row_bytes > 0, "KV geometry: groups of ", g.group_size(), " layers of ", g.row_bytes,
           "-byte rows");
  RF_CHECK(g.block_size > 0 && g.block_size <= 1024, "KV block size ", g.block_size, " is not in [1, 1024]");
  RF_CHECK(budget.state_rows >= 0, "KV budget: ", budget.state_rows, " state rows");
  RF_CHECK(g.state_row_bytes == 0 || budget.state_rows > 0, "KV budget: a model with recurrent layers needs state rows");
  state_rows_ = g.state_row_bytes > 0 ? budget.state_rows : 0;
  if (budget.num_blocks > 0) {
    num_blocks_ = budget.num_blocks;
    return;
  }
  const size_t bytes = budget_bytes(g, budget, state_bytes());
  num_blocks_ = int32_t(std::min<size_t>(bytes / g.bytes_per_block(), size_t(1) << 30));
  RF_CHECK(num_blocks_ > 0, "not enough memory for the KV cache: one block needs ", g.bytes_per_block(), " bytes, ",
           bytes, " available");
}

}  // namespace rf

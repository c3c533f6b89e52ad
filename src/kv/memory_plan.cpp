// KV memory plan: the sizing rule.
#include "kv/memory_plan.h"

#include <algorithm>

#include "core/error.h"

namespace rf {

namespace {

size_t budget_bytes(const KVGeometry& g, const KVBudget& b) {
  if (b.kv_bytes > 0) return b.kv_bytes;
  if (b.memory_utilization > 0) {
    const double budget = double(b.device_total) * b.memory_utilization;
    const double used = double(b.device_used) + double(kDeviceReserveBytes);
    RF_CHECK(budget > used, "--gpu-memory-utilization ", b.memory_utilization, " leaves no room for the KV cache: ",
             used / 1e9, " GB already used of a ", budget / 1e9, " GB budget");
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
  return 2 * rows * row_bytes;
}

KVMemoryPlan::KVMemoryPlan(const KVGeometry& g, const KVBudget& budget) : geometry_(g) {
  RF_CHECK(g.group_size() > 0 && g.row_bytes > 0, "KV geometry: groups of ", g.group_size(), " layers of ", g.row_bytes,
           "-byte rows");
  RF_CHECK(g.block_size > 0 && g.block_size <= 1024, "KV block size ", g.block_size, " is not in [1, 1024]");
  if (budget.num_blocks > 0) {
    num_blocks_ = budget.num_blocks;
    return;
  }
  const size_t bytes = budget_bytes(g, budget);
  num_blocks_ = int32_t(std::min<size_t>(bytes / g.bytes_per_block(), size_t(1) << 30));
  RF_CHECK(num_blocks_ > 0, "not enough memory for the KV cache: one block needs ", g.bytes_per_block(), " bytes, ",
           bytes, " available");
}

}  // namespace rf

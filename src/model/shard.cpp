// Tensor-parallel shard shapes and host-side weight slicing (see shard.h).
#include "model/shard.h"

#include <cstring>

#include "core/error.h"

namespace rf {

IndexRange shard_range(int64_t n, ShardSpec s) {
  const int64_t first = n * s.rank / s.size, end = n * (s.rank + 1) / s.size;
  return IndexRange{first, end - first};
}

IndexRange kv_head_range(int32_t n_head_kv, ShardSpec s) {
  if (n_head_kv >= s.size) return shard_range(n_head_kv, s);
  return IndexRange{int64_t(s.rank) * n_head_kv / s.size, 1};
}

ModelConfig shard_config(const ModelConfig& c, ShardSpec s) {
  RF_CHECK(s.size >= 1 && s.rank >= 0 && s.rank < s.size, "tensor parallel: rank ", s.rank, " of ", s.size);
  if (!s.split()) return c;
  RF_CHECK(!c.is_mla(), "tensor parallelism of '", c.arch,
           "' (multi-head latent attention and its compressed KV cache) is not supported yet");
  RF_CHECK(!c.has_recurrent() && !c.attn_output_gate && c.n_ff_shexp == 0, "tensor parallelism of '", c.arch,
           "' (its recurrent layers, gated attention and shared experts) is not supported yet");
  RF_CHECK(!c.stepwise_layers(), "tensor parallelism of '", c.arch,
           "' (per-layer head sizes, shared KV, per-layer embeddings, experts beside the dense FFN) is not supported yet");
  auto divide = [&](int32_t v, const char* what) {
    RF_CHECK(v % s.size == 0, "tensor parallel size ", s.size, " does not divide the model's ", what, " (", v, ")");
    return v / s.size;
  };
  ModelConfig r = c;
  r.n_head = divide(c.n_head, "attention heads");
  if (c.n_head_kv >= s.size) {
    r.n_head_kv = divide(c.n_head_kv, "KV heads");
  } else {
    // More ranks than KV heads: each rank holds the one KV head its query heads read.
    RF_CHECK(s.size % c.n_head_kv == 0, "tensor parallel size ", s.size, " is not a multiple of the model's ",
             c.n_head_kv, " KV heads (needed to replicate them)");
    r.n_head_kv = 1;
  }
  // An MoE model's layers have experts only: its dense width is unused.
  if (c.has_experts()) r.n_ff_expert = divide(c.n_ff_expert, "expert feed-forward length");
  else r.n_ff = divide(c.n_ff, "feed_forward_length");
  return r;
}

void check_column_split(DType type, int64_t first, int64_t count, int64_t cols, const std::string& name) {
  const int64_t block = int64_t(info(type).block_size);
  RF_CHECK(first >= 0 && count > 0 && first + count <= cols, "columns [", first, ", +", count, ") out of ", cols,
           " columns of '", name, "'");
  RF_CHECK(first % block == 0 && count % block == 0, "tensor '", name, "' (", dtype_name(type), ", blocks of ",
           block, " values) cannot be split for tensor parallelism: each rank's ", count, " of its ", cols,
           " columns must be whole blocks");
}

Tensor copy_columns(const Tensor& host, int64_t first, int64_t count, const std::string& name,
                    std::vector<uint8_t>& storage) {
  check_column_split(host.type, first, count, host.cols(), name);
  // A row-scaled type's header (its scale) holds for any part of the row.
  const size_t header = info(host.type).row_header;
  const size_t in_row = host.row_bytes(), out_row = row_bytes(host.type, uint64_t(count));
  const size_t offset = row_bytes(host.type, uint64_t(first)) - header;
  storage.resize(out_row * size_t(host.rows()));
  const auto* src = static_cast<const uint8_t*>(host.data);
  for (int64_t r = 0; r < host.rows(); ++r) {
    uint8_t* dst = storage.data() + size_t(r) * out_row;
    const uint8_t* row = src + size_t(r) * in_row;
    std::memcpy(dst, row, header);
    std::memcpy(dst + header, row + header + offset, out_row - header);
  }
  return make_tensor(storage.data(), host.type, count, host.rows());
}

Tensor copy_row_ranges(const Tensor& host, const std::vector<IndexRange>& ranges, std::vector<uint8_t>& storage) {
  int64_t rows = 0;
  for (const IndexRange& r : ranges) rows += r.count;
  const size_t rb = host.row_bytes();
  storage.resize(rb * size_t(rows));
  size_t at = 0;
  for (const IndexRange& r : ranges) {
    std::memcpy(storage.data() + at, host.slice_rows(r.first, r.count).data, rb * size_t(r.count));
    at += rb * size_t(r.count);
  }
  return make_tensor(storage.data(), host.type, host.cols(), rows);
}

}  // namespace rf

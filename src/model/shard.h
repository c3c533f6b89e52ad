// Tensor-parallel sharding (Megatron-style) of a model across `size` ranks:
// what each rank holds and computes. Attention heads and KV heads, the FFN
// width and each expert's FFN width are split evenly (column-parallel q, k,
// v, gate and up: a rank's rows; row-parallel attn_output and ffn_down: a
// rank's columns, followed by an all-reduce); the vocabulary is split in
// near-equal row ranges of the embedding and output matrices (an embedding
// lookup outside a rank's range gives zeros, then an all-reduce; each rank
// computes its range's logits). Norms and the router are replicated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/tensor.h"
#include "model/config.h"

namespace rf {

struct ShardSpec {
  int32_t rank = 0;
  int32_t size = 1;
  bool split() const { return size > 1; }
};

struct IndexRange {
  int64_t first = 0, count = 0;
};

// Rank s.rank's part of [0, n): [n * rank / size, n * (rank + 1) / size).
IndexRange shard_range(int64_t n, ShardSpec s);

// The KV heads rank s.rank holds: its share when the ranks do not outnumber
// the KV heads; else (as vLLM does) the one KV head its query heads read,
// replicated on size / n_head_kv ranks.
IndexRange kv_head_range(int32_t n_head_kv, ShardSpec s);

// The configuration a rank's transformer runs: n_head, n_ff and
// n_ff_expert divided by s.size, n_head_kv as kv_head_range (n_vocab stays
// whole: the rank's range of it is shard_range(n_vocab, s)). Throws naming
// the field that does not divide.
ModelConfig shard_config(const ModelConfig& c, ShardSpec s);

// Checks that columns [first, first + count) of a row of `cols` values of
// `type` are whole blocks; else an error naming the tensor.
void check_column_split(DType type, int64_t first, int64_t count, int64_t cols, const std::string& name);

// Host copies of parts of a weight for a rank, into `storage` (which must
// outlive the returned view).
// Columns [first, first + count) of every row of `host`; both must be whole
// blocks of its type, else an error naming `name`.
Tensor copy_columns(const Tensor& host, int64_t first, int64_t count, const std::string& name,
                    std::vector<uint8_t>& storage);
// The rows of each range of `host`, one after another.
Tensor copy_row_ranges(const Tensor& host, const std::vector<IndexRange>& ranges, std::vector<uint8_t>& storage);

}  // namespace rf

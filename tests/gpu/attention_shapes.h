// Attention test shapes shared by the f16 and e4m3 cache tests: head size,
// query and KV heads, sliding window and logit soft-cap, and the name a
// shape takes as a GoogleTest parameter ("hd128_h32_kv8_win500_cap"); and
// the mixed batches both run them on.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/batch.h"

namespace rf::test {

struct AttnShape {
  int hd, n_heads, n_kv;
  int window = 0;
  float softcap = 0.0f;
  bool sinks = false;  // a sink logit per head (gpt-oss): attn_sinks
};

inline std::string attn_shape_name(const AttnShape& p) {
  return "hd" + std::to_string(p.hd) + "_h" + std::to_string(p.n_heads) + "_kv" + std::to_string(p.n_kv) +
         (p.window ? "_win" + std::to_string(p.window) : "") + (p.softcap > 0 ? "_cap" : "") +
         (p.sinks ? "_sinks" : "");
}

// A shape's sink logits (AttentionParams::sinks; empty without): -2 to 6
// over the heads with scores ~N(0, 1), from a sink that barely weighs
// against a context of 2000 keys (e^-2 against ~2000 e^0.5) to one that
// outweighs the keys of short contexts and matters in long ones (e^6 ~ 400:
// a sixth of a 2000-key split-K denominator), so each path's sink term is
// visible in the result.
inline std::vector<float> attn_sinks(const AttnShape& p) {
  std::vector<float> s;
  if (p.sinks)
    for (int h = 0; h < p.n_heads; ++h) s.push_back(-2.0f + 8.0f * float(h) / float(p.n_heads > 1 ? p.n_heads - 1 : 1));
  return s;
}

// The batches, as (context, new tokens) per sequence: a prefill chunk +
// decodes (single pass), decodes with long contexts (split-K), prefill
// chunks late in their sequences (with a window, their first key tiles
// start inside released blocks).
inline const std::vector<std::vector<std::pair<int, int>>>& attention_batch_cases() {
  static const std::vector<std::vector<std::pair<int, int>>> cases = {
      {{40, 40}, {300, 1}, {17, 3}, {1, 1}},
      {{2000, 1}, {1500, 1}, {33, 1}, {2500, 1}},
      {{600, 64}, {90, 20}, {300, 1}, {1, 1}},
      // a prompt chunk beside long single-token sequences (their split-K
      // decode in a mixed step)
      {{64, 64}, {2000, 1}, {1200, 1}, {700, 1}, {5, 5}},
  };
  return cases;
}

// One of them as a batch over a cache of num_blocks blocks of bs slots,
// each sequence's blocks scattered over it.
inline Batch attention_batch(const std::vector<std::pair<int, int>>& seqs, int bs, int max_blocks, int num_blocks) {
  Batch b;
  b.reset(bs, max_blocks);
  int next_block = 0;
  for (auto [ctx, n_new] : seqs) {
    std::vector<int32_t> blocks;
    for (int i = 0; i < (ctx + bs - 1) / bs; ++i) blocks.push_back((next_block++ * 37) % num_blocks);
    b.add_sequence(std::vector<int32_t>(size_t(n_new), 0), ctx - n_new, blocks, true);
  }
  return b;
}

}  // namespace rf::test

// Attention test shapes shared by the f16 and e4m3 cache tests: head size,
// query and KV heads, sliding window and logit soft-cap, and the name a
// shape takes as a GoogleTest parameter ("hd128_h32_kv8_win500_cap").
#pragma once

#include <string>

namespace rf::test {

struct AttnShape {
  int hd, n_heads, n_kv;
  int window = 0;
  float softcap = 0.0f;
};

inline std::string attn_shape_name(const AttnShape& p) {
  return "hd" + std::to_string(p.hd) + "_h" + std::to_string(p.n_heads) + "_kv" + std::to_string(p.n_kv) +
         (p.window ? "_win" + std::to_string(p.window) : "") + (p.softcap > 0 ? "_cap" : "");
}

}  // namespace rf::test

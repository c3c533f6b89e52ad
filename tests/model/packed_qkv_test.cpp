// The loader's packed q/k/v weights (Backend::packs_qkv, what the GPU
// backend asks for): a CPU backend that asks for them holds each layer's
// q, k and v of one format in one allocation, q's rows then k's then v's,
// with the file's values — whole, split over ranks (each rank's heads) and
// for dummy weights — so a model gives exactly the logits of an unpacked
// load. Layers whose formats differ (q4_k_m's Q6_K V) load apart.
#include <gtest/gtest.h>

#include <optional>

#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "model/cpu_ranks.h"
#include "model/evaluator.h"
#include "model/model.h"
#include "model/temp_model.h"
#include "testdata.h"

namespace rf {
namespace {

class PackingCpuBackend : public CpuBackend {
 public:
  PackingCpuBackend() : CpuBackend(1) {}
  bool packs_qkv() const override { return true; }
};

// n ranks of plain CPU backends, or of ones that pack q/k/v.
struct Ranks : test::CpuRanks {
  Ranks(int32_t n, bool packing)
      : CpuRanks(n, [packing]() -> std::unique_ptr<CpuBackend> {
          if (packing) return std::make_unique<PackingCpuBackend>();
          return std::make_unique<CpuBackend>(1);
        }) {}
};

// Whether every layer's q, k and v lie one after another in memory.
bool packed(const ModelWeights& w) {
  for (const LayerWeights& l : w.layers)
    if (static_cast<const uint8_t*>(l.wq.data) + l.wq.bytes() != l.wk.data ||
        static_cast<const uint8_t*>(l.wk.data) + l.wk.bytes() != l.wv.data)
      return false;
  return true;
}

std::vector<float> first_logits(Model& model, Ranks& ranks) {
  EvalOptions eo;
  eo.max_prompt = 16;
  eo.max_context = 24;
  const bool split = ranks.backends.size() > 1;
  Evaluator ev(model, ranks.backends, split ? std::span<Communicator* const>(ranks.comms)
                                            : std::span<Communicator* const>(),
               eo);
  return ev.run(std::vector<int32_t>{1, 5, 9, 30, 7, 11, 2, 40, 3}, 3, {}).first_step_logits;
}

// all_packed: whether every layer's q, k and v must lie end to end (unset:
// not checked, for files mixing formats, see MixedFormatsLoadApart).
void expect_packed_equals_unpacked(const std::string& rel, int32_t n_ranks, std::optional<bool> all_packed) {
  RF_REQUIRE_TESTDATA(rel);
  const std::string path = test::testdata_path(rel);
  Ranks plain(n_ranks, false), packing(n_ranks, true);
  auto a = Model::load(path, plain.backends, false);
  auto b = Model::load(path, packing.backends, false);
  if (all_packed) {
    for (int32_t r = 0; r < n_ranks; ++r) EXPECT_EQ(packed(b->rank_weights(r)), *all_packed) << rel << " rank " << r;
  }
  EXPECT_EQ(first_logits(*a, plain), first_logits(*b, packing)) << rel << " at " << n_ranks << " ranks";
}

TEST(PackedQkv, StoriesWhole) { expect_packed_equals_unpacked("stories260K.gguf", 1, true); }
TEST(PackedQkv, Qwen2BiasesTwoRanks) { expect_packed_equals_unpacked("arch/tiny-qwen2.gguf", 2, true); }
TEST(PackedQkv, Gemma2TwoRanks) { expect_packed_equals_unpacked("arch/tiny-gemma2.gguf", 2, true); }
TEST(PackedQkv, StoriesFourRanks) { expect_packed_equals_unpacked("stories260K.gguf", 4, true); }
TEST(PackedQkv, Q4_0TwoRanks) { expect_packed_equals_unpacked("quant/qtest-q4_0.gguf", 2, true); }
// Fused attn_qkv in the file: one tensor either way.
TEST(PackedQkv, Phi3FusedInTheFile) { expect_packed_equals_unpacked("arch/tiny-phi3.gguf", 1, true); }

TEST(PackedQkv, MixedFormatsLoadApart) {
  RF_REQUIRE_TESTDATA("quant/qtest-q4_k_m.gguf");
  Ranks packing(1, true);
  auto m = Model::load(test::testdata_path("quant/qtest-q4_k_m.gguf"), packing.backends, false);
  int mixed = 0;
  for (const LayerWeights& l : m->weights().layers) {
    const bool same = l.wq.type == l.wk.type && l.wk.type == l.wv.type;
    mixed += !same;
    // Same formats: packed, one after another. (Mixed ones load apart, each
    // by load_weight, whose CPU copies may also lie end to end: nothing to
    // tell apart by address; the logits below compare them with unpacked.)
    if (same) {
      EXPECT_TRUE(static_cast<const uint8_t*>(l.wq.data) + l.wq.bytes() == l.wk.data &&
                  static_cast<const uint8_t*>(l.wk.data) + l.wk.bytes() == l.wv.data);
    }
  }
  EXPECT_GT(mixed, 0) << "the file should keep some V projections in another format";
  expect_packed_equals_unpacked("quant/qtest-q4_k_m.gguf", 1, std::nullopt);
}

TEST(PackedQkv, DummyWeightsHoldTheSameValues) {
  for (const int32_t n_ranks : {1, 2}) {
    Ranks plain(n_ranks, false), packing(n_ranks, true);
    auto a = Model::load_dummy("tiny-qwen2:q8_0", plain.backends, false);
    auto b = Model::load_dummy("tiny-qwen2:q8_0", packing.backends, false);
    for (int32_t r = 0; r < n_ranks; ++r) EXPECT_TRUE(packed(b->rank_weights(r)));
    EXPECT_EQ(first_logits(*a, plain), first_logits(*b, packing)) << n_ranks << " ranks";
  }
}

}  // namespace
}  // namespace rf

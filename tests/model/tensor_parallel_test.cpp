// Tensor parallelism on the CPU build, its ranks joined by in-process
// collectives (the CI stand-in for NCCL): every model family, stories260K
// and the block formats whose shards are whole blocks (FP8 weights too) give, split over 2
// (and 4) ranks, the greedy tokens of one rank and its logits to float
// rounding (the all-reduces sum partial products in another order: the
// largest difference measured is 6.5e-5 of the largest logit, on gemma3).
// Shapes that cannot be split are refused naming what does not divide.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "model/cpu_ranks.h"
#include "model/evaluator.h"
#include "model/model.h"
#include "model/shard.h"
#include "model/temp_model.h"
#include "testdata.h"

namespace rf {
namespace {

using Ranks = test::CpuRanks;

std::vector<std::vector<int32_t>> prompts(int32_t vocab) {
  std::vector<std::vector<int32_t>> out;
  for (int32_t k = 0; k < 3; ++k) {
    std::vector<int32_t> p = {1};
    for (int32_t i = 0; i < 5 + 9 * k; ++i) p.push_back(3 + (37 * i + 101 * k) % (std::min(vocab, 500) - 3));
    out.push_back(p);
  }
  return out;
}

std::vector<EvalResult> evaluate(const std::string& path, int32_t n_ranks) {
  Ranks ranks(n_ranks);
  auto model = Model::load(path, ranks.backends, false);
  const auto ps = prompts(model->config().n_vocab);
  EvalOptions eo;
  eo.max_prompt = 32;
  eo.max_context = 64;
  Evaluator ev(*model, ranks.backends, n_ranks > 1 ? std::span<Communicator* const>(ranks.comms)
                                                   : std::span<Communicator* const>(),
               eo);
  std::vector<EvalResult> out;
  for (const auto& p : ps) out.push_back(ev.run(p, 10, {}));
  return out;
}

void expect_same_file(const std::string& path, const std::string& rel, int32_t n_ranks) {
  const auto one = evaluate(path, 1), split = evaluate(path, n_ranks);
  ASSERT_EQ(one.size(), split.size());
  double worst = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(split[i].greedy_tokens, one[i].greedy_tokens) << rel << " prompt " << i;
    ASSERT_EQ(split[i].first_step_logits.size(), one[i].first_step_logits.size());
    double top = 0, diff = 0;
    for (size_t t = 0; t < one[i].first_step_logits.size(); ++t) {
      top = std::max(top, std::fabs(double(one[i].first_step_logits[t])));
      diff = std::max(diff, std::fabs(double(split[i].first_step_logits[t]) - one[i].first_step_logits[t]));
    }
    worst = std::max(worst, diff / top);
    EXPECT_LE(diff, 1e-3 * top) << rel << " prompt " << i;
  }
  std::printf("%s at %d ranks: largest logit difference %.2g of the largest logit\n", rel.c_str(), n_ranks, worst);
}

void expect_same(const std::string& rel, int32_t n_ranks) {
  RF_REQUIRE_TESTDATA(rel);
  expect_same_file(test::testdata_path(rel), rel, n_ranks);
}

class TwoRanks : public ::testing::TestWithParam<std::string> {};

TEST_P(TwoRanks, MatchOneRank) { expect_same(GetParam(), 2); }

INSTANTIATE_TEST_SUITE_P(Models, TwoRanks,
                         ::testing::Values("stories260K.gguf", "arch/tiny-qwen2.gguf", "arch/tiny-qwen3.gguf",
                                           "arch/tiny-gemma2.gguf", "arch/tiny-gemma3.gguf", "arch/tiny-phi3.gguf",
                                           "arch/tiny-glm4.gguf", "arch/tiny-mixtral.gguf",
                                           "arch/tiny-qwen3moe.gguf", "quant/qtest-f16.gguf",
                                           "quant/qtest-q8_0.gguf", "quant/qtest-q4_0.gguf",
                                           "quant/qtest-q5_1.gguf"),
                         [](const auto& info) { return test::testdata_param_name(info.param); });

TEST(TensorParallel, FourRanksMatchOneRank) { expect_same("stories260K.gguf", 4); }  // 8 heads, 4 KV heads

// FP8 weights: a rank's columns of attn_output and ffn_down keep each row's scale.
TEST(TensorParallel, Fp8WeightsTwoRanksMatchOneRank) {
  test::TempModel fp8("tiny", "fp8");
  expect_same_file(fp8.path(), "synthetic tiny fp8", 2);
}

// More ranks than KV heads: each rank holds the KV head its query heads read.
TEST(TensorParallel, FourRanksReplicateTwoKVHeads) {
  for (const char* rel : {"arch/tiny-qwen3.gguf", "arch/tiny-phi3.gguf", "arch/tiny-qwen3moe.gguf"})
    expect_same(rel, 4);
}

TEST(TensorParallel, ShardsSplitHeadsWidthsAndVocabulary) {
  ModelConfig c;
  c.n_head = 32, c.n_head_kv = 8, c.n_ff = 14336, c.head_dim = 128, c.n_vocab = 128256;
  const ModelConfig s = shard_config(c, ShardSpec{1, 4});
  EXPECT_EQ(s.n_head, 8);
  EXPECT_EQ(s.n_head_kv, 2);
  EXPECT_EQ(s.n_ff, 3584);
  EXPECT_EQ(s.n_vocab, 128256);  // whole: the rank's range is shard_range's
  int64_t covered = 0;
  for (int32_t r = 0; r < 3; ++r) {
    const IndexRange v = shard_range(1001, ShardSpec{r, 3});
    EXPECT_EQ(v.first, covered);
    covered += v.count;
  }
  EXPECT_EQ(covered, 1001);
}

TEST(TensorParallel, ShapesThatDoNotSplitAreRefusedByName) {
  ModelConfig c;
  c.n_head = 32, c.n_head_kv = 8, c.n_ff = 14336, c.head_dim = 128;
  auto message = [&](const ModelConfig& m, int32_t n) {
    try {
      shard_config(m, ShardSpec{0, n});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(c, 3).find("attention heads"), std::string::npos) << message(c, 3);
  ModelConfig six_kv = c;
  six_kv.n_head_kv = 6;  // 16 ranks cannot share 6 KV heads evenly
  EXPECT_NE(message(six_kv, 16).find("KV heads"), std::string::npos) << message(six_kv, 16);
  EXPECT_EQ(shard_config(c, ShardSpec{5, 16}).n_head_kv, 1);  // 8 KV heads on 16 ranks: one each, replicated
  EXPECT_EQ(kv_head_range(8, ShardSpec{5, 16}).first, 2);
  ModelConfig odd = c;
  odd.n_ff = 14337;
  EXPECT_NE(message(odd, 2).find("feed_forward_length"), std::string::npos) << message(odd, 2);
  // A k-quant attn_output of 256 columns cannot give each of 2 ranks whole 256-value blocks.
  RF_REQUIRE_TESTDATA("quant/qtest-q4_k.gguf");
  Ranks ranks(2);
  try {
    Model::load(test::testdata_path("quant/qtest-q4_k.gguf"), ranks.backends, false);
    ADD_FAILURE() << "a q4_K attn_output of 256 columns was split in 2";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("blk.0.attn_output.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("whole blocks"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace rf

namespace rf {
namespace {

// --load-format dummy: a preset's shapes with weights made on the backends
// (no file): the configuration is the preset's, each rank holds its share,
// and the forward pass gives finite logits.
TEST(DummyWeights, PresetShapesSplitOverRanks) {
  Ranks two(2), one(1);
  auto split = Model::load_dummy("tiny-qwen2:q8_0", two.backends, false);
  auto whole = Model::load_dummy("tiny-qwen2:q8_0", one.backends, false);
  EXPECT_EQ(split->config().arch, "qwen2");
  EXPECT_EQ(split->config().n_embd, 256);
  EXPECT_EQ(split->rank_config(1).n_head, split->config().n_head / 2);
  EXPECT_EQ(split->rank_weights(1).layers[0].wq.rows(), whole->weights().layers[0].wq.rows() / 2);
  EXPECT_EQ(split->rank_weights(0).layers[0].wo.cols(), whole->weights().layers[0].wo.cols() / 2);
  EXPECT_EQ(split->rank_weights(0).tok_embd.rows() + split->rank_weights(1).tok_embd.rows(),
            whole->weights().tok_embd.rows());
  EvalOptions eo;
  eo.max_prompt = 8;
  eo.max_context = 12;
  Evaluator ev(*split, two.backends, two.comms, eo);
  const EvalResult r = ev.run(std::vector<int32_t>{1, 5, 9, 300}, 4, {});
  EXPECT_EQ(r.greedy_tokens.size(), 4u);
  for (float x : r.first_step_logits) ASSERT_TRUE(std::isfinite(x));
  EXPECT_THROW(Model::load_dummy("no-such-preset", one.backends, false), Error);
}

}  // namespace
}  // namespace rf

// Vocabulary-parallel sampling (CpuBackend::sample_vocab_parallel) against
// the reference sampler over the whole logits: 2, 3 and 4 ranks (uneven
// ranges), every sampling rule (greedy, temperature, top-k with ties,
// top-p, min-p, their combinations), biases, penalties, bans, structured
// output masks and top logprobs, over many draws. Tokens and top-logprob
// ids must be identical; logprobs agree to float rounding (the normalizer
// is summed per rank). Also: a rank that fails makes the others' waiting
// collectives fail instead of hanging.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "backend/loopback_comm.h"
#include "core/error.h"

namespace rf {
namespace {

struct Case {
  std::vector<float> logits;  // [rows, vocab]
  std::vector<SampleRow> rows;
  std::vector<PenaltyToken> penalties;
  std::vector<std::vector<uint32_t>> masks;
};

Case make_case(int32_t vocab, uint64_t counter) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<SamplingParams> ps;
  auto add = [&](auto f) {
    SamplingParams p;
    p.seed = 5 + ps.size();
    p.top_logprobs = int32_t(ps.size() % 4 == 0 ? 5 : 0);
    f(p);
    ps.push_back(p);
  };
  add([](SamplingParams& p) { p.temperature = 0; });
  add([](SamplingParams& p) { p.temperature = 1.0f; });
  add([](SamplingParams& p) { p.temperature = 0.7f, p.top_k = 40; });
  add([](SamplingParams& p) { p.temperature = 1.3f, p.top_p = 0.9f; });
  add([](SamplingParams& p) { p.temperature = 0.8f, p.min_p = 0.05f; });
  add([](SamplingParams& p) { p.temperature = 0.9f, p.top_k = 50, p.top_p = 0.8f, p.min_p = 0.02f; });
  add([](SamplingParams& p) { p.temperature = 1.0f, p.top_k = 1; });
  add([](SamplingParams& p) { p.temperature = 2.0f, p.top_p = 0.3f, p.top_logprobs = 20; });
  add([](SamplingParams& p) { p.temperature = 0.6f, p.repetition_penalty = 1.3f, p.presence_penalty = 0.4f; });
  add([](SamplingParams& p) { p.temperature = 0; p.frequency_penalty = 0.7f; });
  add([](SamplingParams& p) { p.temperature = 1.0f, p.top_k = 7; });  // on the tied row below
  add([](SamplingParams& p) { p.temperature = 0.5f, p.top_p = 0.5f; });  // masked row
  Case c;
  const size_t n = ps.size();
  c.logits.resize(n * size_t(vocab));
  for (float& x : c.logits) x = nd(rng);
  // Row 10: few distinct values, so top-k and the draw meet ties.
  for (int32_t i = 0; i < vocab; ++i) c.logits[10 * size_t(vocab) + size_t(i)] = float(i % 5);
  c.masks.resize(n);
  for (size_t r = 0; r < n; ++r) {
    SampleRow row;
    row.params = ps[r];
    row.rng_counter = counter;
    row.penalty_offset = int32_t(c.penalties.size());
    if (r == 1 || r == 2 || r == 8 || r == 9) {
      for (int32_t t : {3, vocab / 2, vocab - 1, 17}) c.penalties.push_back(PenaltyToken{t, 2, 1, 0, 0.0f});
      c.penalties.push_back(PenaltyToken{vocab / 3, 0, 0, 0, 4.0f});  // a logit bias
      c.penalties.push_back(PenaltyToken{int32_t(rng() % uint32_t(vocab)), 0, 0, 1});  // a ban
    }
    row.penalty_count = int32_t(c.penalties.size()) - row.penalty_offset;
    if (r == 11 || r == 0) {
      c.masks[r].assign(size_t(vocab + 31) / 32, 0u);
      for (int32_t t = 0; t < vocab; t += 1 + int32_t(rng() % 9)) c.masks[r][size_t(t >> 5)] |= 1u << (t & 31);
      row.allowed = c.masks[r].data();
    }
    c.rows.push_back(row);
  }
  return c;
}

void check_against_whole(int32_t ranks, int32_t vocab) {
  CpuBackend whole(1);
  std::vector<std::unique_ptr<CpuBackend>> backends;
  for (int32_t r = 0; r < ranks; ++r) backends.push_back(std::make_unique<CpuBackend>(1));
  LoopbackGroup group(ranks);
  for (uint64_t counter = 0; counter < 40; ++counter) {
    Case c = make_case(vocab, counter);
    const int64_t n_rows = int64_t(c.rows.size());
    std::vector<SampleResult> want;
    whole.sample(make_tensor(c.logits.data(), DType::F32, vocab, n_rows), c.rows, c.penalties, want);
    std::vector<std::vector<SampleResult>> got(static_cast<size_t>(ranks));
    std::vector<std::vector<float>> parts(static_cast<size_t>(ranks));
    std::vector<std::thread> threads;
    for (int32_t r = 0; r < ranks; ++r) {
      struct {
        int64_t first, count;
      } v{int64_t(vocab) * r / ranks, int64_t(vocab) * (r + 1) / ranks - int64_t(vocab) * r / ranks};
      for (int64_t row = 0; row < n_rows; ++row)
        parts[size_t(r)].insert(parts[size_t(r)].end(), c.logits.begin() + row * vocab + v.first,
                                c.logits.begin() + row * vocab + v.first + v.count);
      threads.emplace_back([&, r, v] {
        backends[size_t(r)]->sample_vocab_parallel(make_tensor(parts[size_t(r)].data(), DType::F32, v.count, n_rows),
                                                   v.first, vocab, c.rows, c.penalties, group.rank(r),
                                                   got[size_t(r)]);
      });
    }
    for (auto& t : threads) t.join();
    for (int32_t r = 0; r < ranks; ++r) {
      ASSERT_EQ(got[size_t(r)].size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const SampleResult &a = got[size_t(r)][i], &b = want[i];
        EXPECT_EQ(a.token, b.token) << "rank " << r << " row " << i << " counter " << counter;
        EXPECT_NEAR(a.logprob, b.logprob, 1e-5) << "row " << i;
        ASSERT_EQ(a.top.size(), b.top.size()) << "row " << i;
        for (size_t j = 0; j < a.top.size(); ++j) {
          EXPECT_EQ(a.top[j].first, b.top[j].first) << "row " << i << " alternative " << j;
          EXPECT_NEAR(a.top[j].second, b.top[j].second, 1e-5);
        }
      }
    }
  }
}

TEST(CpuSampleVocabParallel, TwoRanksMatchTheWholeVocabulary) { check_against_whole(2, 1000); }
TEST(CpuSampleVocabParallel, ThreeUnevenRanksMatchTheWholeVocabulary) { check_against_whole(3, 1001); }
TEST(CpuSampleVocabParallel, FourRanksMatchTheWholeVocabulary) { check_against_whole(4, 515); }

TEST(LoopbackGroup, AllReduceSumsInRankOrderOnEveryRank) {
  LoopbackGroup group(3);
  std::vector<std::vector<float>> x = {{1.0f, 2.0f}, {10.0f, 20.0f}, {100.0f, 200.0f}};
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      Tensor t = make_tensor(x[size_t(r)].data(), DType::F32, 2);
      group.rank(r).all_reduce_sum(t);
    });
  for (auto& t : threads) t.join();
  for (const auto& v : x) EXPECT_EQ(v, (std::vector<float>{111.0f, 222.0f}));
}

TEST(LoopbackGroup, AFailedRankReleasesTheOthers) {
  LoopbackGroup group(2);
  std::string error;
  std::thread waiter([&] {
    try {
      int32_t in = 1, out[2];
      group.rank(0).all_gather_host(&in, sizeof(in), out);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  group.rank(1).abort();  // rank 1 failed before its collective
  waiter.join();
  EXPECT_NE(error.find("another rank failed"), std::string::npos) << error;
  // And later collectives fail at once.
  float v = 1.0f;
  Tensor t = make_tensor(&v, DType::F32, 1);
  EXPECT_THROW(group.rank(0).all_reduce_sum(t), Error);
}

}  // namespace
}  // namespace rf

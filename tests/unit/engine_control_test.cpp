// Engine control on the CPU with stories260K: cancellation (queued,
// prefilling, decoding) frees blocks within one step and leaves the others'
// output unchanged; invalid requests and requests larger than the whole KV
// cache are refused at submit with clear errors; a full queue refuses with
// EngineBusy; the threaded mode serves several submitter threads, and
// stop() cancels what is still running.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::config;
using test::greedy;
using test::Output;

TEST(EngineControl, CancellationFreesBlocksWithinOneStep) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  // 8 tokens per step: a 60-token prompt takes many steps to prefill.
  auto engine = st.engine(config(40, 4, 8, 64, true));
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 60; ++i) long_prompt.push_back(golden[i % 4].prompt_tokens[size_t(i % 5)] + i);
  RequestHandle keep = engine->submit(greedy(golden[1].prompt_tokens, 30));
  RequestHandle decoding = engine->submit(greedy(golden[0].prompt_tokens, 100));
  RequestHandle prefilling = engine->submit(greedy(long_prompt, 10));
  RequestHandle queued = engine->submit(greedy(golden[2].prompt_tokens, 10));
  for (int i = 0; i < 8; ++i) engine->step();
  const int32_t free_before = engine->free_blocks();
  EXPECT_LT(free_before, engine->num_blocks());
  decoding->cancel();
  prefilling->cancel();
  queued->cancel();
  engine->step();
  for (RequestHandle h : {decoding, prefilling, queued}) {
    Output o;
    test::read_events(*h, o, false);
    ASSERT_TRUE(o.finished) << "request " << h->id();
    EXPECT_EQ(o.reason, FinishReason::Cancelled);
  }
  EXPECT_GT(engine->free_blocks(), free_before);
  engine->run_until_idle();
  // The survivor's output is its golden one.
  Output o;
  test::read_events(*keep, o, false);
  EXPECT_EQ(o.tokens, std::vector<int32_t>(golden[1].greedy_tokens.begin(), golden[1].greedy_tokens.begin() + 30));
  EXPECT_EQ(engine->metrics().requests_cancelled.load(), 3u);
  test::expect_idle(*engine);

  // Cancelling the only request: all blocks back after one step.
  RequestHandle h = engine->submit(greedy(golden[0].prompt_tokens, 100));
  for (int i = 0; i < 5; ++i) engine->step();
  EXPECT_LT(engine->free_blocks(), engine->num_blocks());
  h->cancel();
  engine->step();
  EXPECT_TRUE(h->finished());
  test::expect_idle(*engine);
}

TEST(EngineControl, InvalidRequestsAreRefusedAtSubmit) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  // 4 blocks of 16 tokens: 64 tokens of KV in all.
  auto engine = st.engine(config(4, 16));
  auto message = [&](const Request& r) {
    try {
      engine->submit(r);
    } catch (const EngineBusy&) {
      return std::string("busy");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::vector<int32_t> p50(50, 300);
  EXPECT_NE(message(greedy(p50, 20)).find("KV cache"), std::string::npos) << message(greedy(p50, 20));
  EXPECT_NE(message(greedy(p50, 20)).find("70"), std::string::npos);  // says how many it needs
  EXPECT_EQ(message(greedy(p50, 14)), "");                            // exactly the whole cache
  EXPECT_NE(message(greedy({}, 5)).find("empty"), std::string::npos);
  EXPECT_NE(message(greedy({1, 512}, 5)).find("out of range"), std::string::npos);
  EXPECT_NE(message(greedy({1, -1}, 5)).find("out of range"), std::string::npos);
  EXPECT_NE(message(greedy({1}, 0)).find("max_tokens"), std::string::npos);
  Request r = greedy({1, 2, 3}, 5);
  r.min_tokens = 6;
  EXPECT_NE(message(r).find("min_tokens"), std::string::npos);
  // Longer than the context (512 in these tests).
  auto big = st.engine(config(64, 16));
  try {
    big->submit(greedy(std::vector<int32_t>(500, 300), 13));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("maximum context length is 512"), std::string::npos) << e.what();
  }
  engine->run_until_idle();
  EXPECT_EQ(engine->metrics().requests_finished.load(), 1u);
  test::expect_idle(*engine);
  test::expect_idle(*big);
}

TEST(EngineControl, FullQueueRefusesWithEngineBusy) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  EngineConfig cfg = config(64);
  cfg.max_queue = 3;
  cfg.max_num_seqs = 1;  // one runs, three may wait for its slot
  auto engine = st.engine(cfg);
  const auto p = test::read_golden()[0].prompt_tokens;
  std::vector<RequestHandle> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(engine->submit(greedy(p, 4)));
  EXPECT_THROW(engine->submit(greedy(p, 4)), EngineBusy);
  engine->step();  // one runs, three wait: still full
  EXPECT_THROW(engine->submit(greedy(p, 4)), EngineBusy);
  hs[3]->cancel();
  engine->step();  // the cancelled one leaves the queue: room for one more
  hs.push_back(engine->submit(greedy(p, 4)));
  EXPECT_THROW(engine->submit(greedy(p, 4)), EngineBusy);
  engine->run_until_idle();
  for (size_t i = 0; i < hs.size(); ++i)
    EXPECT_EQ(test::read_all(*hs[i]).reason, i == 3 ? FinishReason::Cancelled : FinishReason::Length) << i;
  hs.push_back(engine->submit(greedy(p, 4)));  // accepted again once drained
  engine->run_until_idle();
  EXPECT_EQ(test::read_all(*hs.back()).tokens.size(), 4u);
  test::expect_idle(*engine);
}

// Requests arriving together while slots are free are all admitted, however
// the engine thread interleaves with the submitters: only requests beyond
// the free slots count against max_queue.
TEST(EngineControl, BurstIntoFreeSlotsIsAdmitted) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  EngineConfig cfg = config(512);
  cfg.max_num_seqs = 8;
  cfg.max_queue = 1;
  auto engine = st.engine(cfg);
  engine->start();
  const auto p = test::read_golden()[0].prompt_tokens;
  Request long_request = greedy(p, 400);  // runs until cancelled
  long_request.ignore_eos = true;
  for (int round = 0; round < 20; ++round) {
    std::vector<RequestHandle> hs(8);
    std::atomic<int> refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        try {
          hs[size_t(t)] = engine->submit(long_request);
        } catch (const EngineBusy&) {
          ++refused;
        }
      });
    for (auto& th : threads) th.join();
    ASSERT_EQ(refused.load(), 0) << "round " << round;
    RequestHandle ninth = engine->submit(greedy(p, 2));  // waits for a slot: the queue holds one
    EXPECT_THROW(engine->submit(greedy(p, 2)), EngineBusy) << "round " << round;
    for (auto& h : hs) h->cancel();
    EXPECT_EQ(test::read_all(*ninth).tokens.size(), 2u);
    for (auto& h : hs) EXPECT_EQ(test::read_all(*h).reason, FinishReason::Cancelled);
  }
  engine->stop();
  test::expect_idle(*engine);
}

TEST(EngineControl, ThreadedModeWithConcurrentSubmitters) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  // Few blocks, so that threads' requests also preempt each other.
  auto engine = st.engine(config(12, 16, 64));
  engine->start();
  constexpr int kThreads = 4, kPerThread = 6;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const auto& g = golden[size_t((t + i) % 4)];
        const int32_t n = 20 + 11 * ((t * kPerThread + i) % 5);
        RequestHandle h = engine->submit(greedy(g.prompt_tokens, n));
        // A streaming client: events as they come.
        Output o = test::read_all(*h);
        const std::vector<int32_t> want(g.greedy_tokens.begin(), g.greedy_tokens.begin() + n);
        if (o.tokens != want || o.reason != FinishReason::Length || o.completion_tokens != n) {
          ++bad;
          failures[size_t(t)] = "thread " + std::to_string(t) + " request " + std::to_string(i);
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0) << failures[0] << failures[1] << failures[2] << failures[3];
  EXPECT_EQ(engine->metrics().requests_finished.load(), uint64_t(kThreads * kPerThread));
  engine->stop();
  test::expect_idle(*engine);
}

TEST(EngineControl, StopCancelsWhatIsRunning) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto g = test::read_golden()[0];
  auto engine = st.engine(config(64));
  engine->start();
  RequestHandle h = engine->submit(greedy(g.prompt_tokens, 400));
  // Wait for the first token, then stop the engine under it.
  Output o;
  while (o.tokens.empty()) {
    auto ev = h->next(std::chrono::milliseconds(5000));
    ASSERT_TRUE(ev) << "no token within 5 s";
    o.tokens.insert(o.tokens.end(), ev->tokens.begin(), ev->tokens.end());
    ASSERT_FALSE(ev->finished);
  }
  engine->stop();
  test::read_events(*h, o, false);
  EXPECT_TRUE(o.finished);
  EXPECT_EQ(o.reason, FinishReason::Cancelled);
  EXPECT_LT(o.tokens.size(), 400u);
  test::expect_idle(*engine);
  // The engine can be stepped directly (or started) again afterwards.
  Output again = test::run_one(*engine, greedy(g.prompt_tokens, 3));
  EXPECT_EQ(again.tokens, std::vector<int32_t>(g.greedy_tokens.begin(), g.greedy_tokens.begin() + 3));
  test::expect_idle(*engine);
}

// A stream's events are queued as its step ends (a poll sees them), while
// its listener (the server's wake-up) is called with the next step's
// launch (on the CPU, before it: its forward pass is the step), or when the
// engine runs out of work: never lost.
TEST(EngineControl, ListenersWokenWithTheNextStep) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  auto engine = st.engine(config(40, 4, 64, 64, true));
  RequestHandle h = engine->submit(greedy(golden[0].prompt_tokens, 5));
  std::atomic<int> wakes{0};
  h->set_listener([&] { wakes++; });
  engine->step();  // the prompt: its first token queued, the listener not called yet
  ASSERT_TRUE(h->next(std::chrono::milliseconds(0)).has_value());
  EXPECT_EQ(wakes.load(), 0);
  engine->step();  // the next step launched: the first token's wake-up, then its own token queued
  EXPECT_EQ(wakes.load(), 1);
  engine->run_until_idle();  // the last events' wake-up before the engine idles
  Output o;
  test::read_events(*h, o, false);
  EXPECT_TRUE(o.finished);
  EXPECT_EQ(o.tokens.size(), 4u);  // (the first was read above)
  EXPECT_EQ(wakes.load(), 5);      // one a step's events: 4 decode steps and the idle one
  h->set_listener(nullptr);
}

}  // namespace
}  // namespace rf

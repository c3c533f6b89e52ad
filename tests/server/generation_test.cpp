// Generation (src/server/generation.h) against the real stories260K model on
// the CPU engine, driven the way the HTTP transport drives it (woken by its
// listener, pulling what is ready): streamed and non-streamed greedy text
// agree and match the golden text; SSE events are well formed; a Generation
// dropped mid-stream (a client that left) cancels and frees every KV block;
// bad prompts, an exceeded context, broken chat templates, a logit_bias
// outside the vocabulary and a full queue give the right API errors;
// /tokenize gives the prompts generations get, /detokenize the text back.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/model_service.h"
#include "testdata.h"

namespace rf::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Wakes a waiting test thread from a Generation's listener. The listener
// shares the state: the engine may call it after the test has taken the last
// event and this Wakeup is gone (RequestStream calls listeners outside its
// lock), so it must not point into the Wakeup.
class Wakeup {
 public:
  std::function<void()> listener() {
    return [s = state_] {
      std::lock_guard<std::mutex> lock(s->mu);
      s->woken = true;
      s->cv.notify_all();
    };
  }
  void wait() {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait_for(lock, 1s, [&] { return state_->woken; });  // the timeout only guards against a lost wake-up bug
    state_->woken = false;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// The JSON body of a non-streamed Generation.
std::string run_to_completion(Generation& g) {
  Wakeup w;
  g.set_listener(w.listener());
  for (;;) {
    if (auto body = g.pull_result()) return *body;
    w.wait();
  }
}

// The whole SSE body of a streamed Generation.
std::string stream_all(Generation& g) {
  Wakeup w;
  g.set_listener(w.listener());
  std::string body;
  while (!g.pull_events(body)) w.wait();
  return body;
}

class ServerGeneration : public ::testing::Test {
 protected:
  void SetUp() override {
    RF_REQUIRE_TESTDATA("stories260K.gguf");
    model_ = Model::load(test::testdata_path("stories260K.gguf"), backend_, false);
    tok_ = Tokenizer::from_gguf(model_->file());
  }
  void start(int32_t max_queue = 64, std::string chat_template = ChatTemplate::chatml_source(),
             int32_t max_num_seqs = EngineConfig{}.max_num_seqs) {
    EngineConfig cfg;
    cfg.max_num_seqs = max_num_seqs;
    cfg.num_blocks = 256;
    cfg.max_model_len = 256;
    cfg.max_num_batched_tokens = 256;
    cfg.max_queue = max_queue;
    engine_ = std::make_unique<Engine>(*model_, *tok_, backend_, cfg);
    chat_ = std::make_unique<ChatPrompt>(*tok_, std::move(chat_template), "test");
    svc_ = std::make_unique<ModelService>(*engine_, *chat_, std::vector<std::string>{"stories260K"});
  }
  void TearDown() override {
    svc_.reset();
    if (engine_) engine_->stop();
    engine_.reset();
  }
  // Waits until every KV block is back (the engine frees them within a step).
  bool all_blocks_free() {
    for (int i = 0; i < 500; ++i) {
      if (engine_->free_blocks() == engine_->num_blocks() && engine_->active_requests() == 0) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  static GenerationRequest completion(const std::string& prompt, int max_tokens) {
    GenerationRequest r;
    r.prompts.push_back(PromptInput{false, prompt, {}});
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    return r;
  }
  // The concatenated text of an SSE body; checks framing and [DONE].
  static std::string streamed_text(const std::string& body, json* usage = nullptr, std::string* finish = nullptr) {
    std::string text;
    size_t pos = 0;
    bool done = false;
    while (pos < body.size()) {
      const size_t end = body.find("\n\n", pos);
      EXPECT_NE(end, std::string::npos);
      if (end == std::string::npos) break;
      const std::string ev = body.substr(pos, end - pos);
      pos = end + 2;
      if (ev[0] == ':') continue;  // comment (keep-alive)
      EXPECT_EQ(ev.rfind("data: ", 0), 0u);
      EXPECT_FALSE(done) << "event after [DONE]";
      if (ev == "data: [DONE]") {
        done = true;
        continue;
      }
      const json j = json::parse(ev.substr(6));
      EXPECT_FALSE(j.contains("error")) << ev;
      if (j.contains("usage") && !j["usage"].is_null() && usage) *usage = j["usage"];
      for (const auto& c : j["choices"]) {
        if (c.contains("text")) text += c["text"].get<std::string>();
        if (c.contains("delta") && c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
        if (!c["finish_reason"].is_null() && finish) *finish = c["finish_reason"];
      }
    }
    EXPECT_TRUE(done) << "no [DONE]";
    return text;
  }

  CpuBackend backend_{1};
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ChatPrompt> chat_;
  std::unique_ptr<ModelService> svc_;
};

TEST_F(ServerGeneration, StreamedEqualsNonStreamedEqualsGolden) {
  start();
  engine_->start();
  std::ifstream in(test::testdata_path("stories260K.golden.jsonl"));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const json golden = json::parse(line);
  const int n = int(golden["greedy_tokens"].size());
  const std::string want = golden["greedy_text"];

  Generation plain(*svc_, completion(golden["prompt"], n));
  const json full = json::parse(run_to_completion(plain));
  EXPECT_EQ(full["choices"][0]["text"], want);
  EXPECT_EQ(full["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(full["usage"]["completion_tokens"], n);
  EXPECT_EQ(full["usage"]["prompt_tokens"], golden["prompt_tokens"].size());

  GenerationRequest sreq = completion(golden["prompt"], n);
  sreq.stream = true;
  sreq.include_usage = true;
  Generation streamed(*svc_, sreq);
  const std::string body = stream_all(streamed);
  json usage;
  std::string finish;
  EXPECT_EQ(streamed_text(body, &usage, &finish), want);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], n);
  EXPECT_TRUE(all_blocks_free());
}

TEST_F(ServerGeneration, BatchPromptsStreamEveryIndex) {
  start();
  engine_->start();
  GenerationRequest r = completion("Once upon a time", 12);
  r.prompts.push_back(PromptInput{false, "The little dog", {}});
  r.prompts.push_back(PromptInput{true, "", {1, 403, 407}});
  Generation plain(*svc_, r);
  const json full = json::parse(run_to_completion(plain));
  ASSERT_EQ(full["choices"].size(), 3u);
  r.stream = true;
  Generation g(*svc_, r);
  const std::string body = stream_all(g);
  // Per-index streamed text equals the non-streamed choice.
  std::vector<std::string> texts(3);
  size_t pos = 0;
  while ((pos = body.find("data: {", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const json j = json::parse(body.substr(pos + 6, end - pos - 6));
    for (const auto& c : j["choices"]) texts[c["index"].get<size_t>()] += c["text"].get<std::string>();
    pos = end;
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(texts[i], full["choices"][i]["text"]) << i;
}

TEST_F(ServerGeneration, ChatRendersAndStreams) {
  start();
  engine_->start();
  GenerationRequest r;
  r.endpoint = Endpoint::ChatCompletions;
  r.messages = Json::array({{{"role", "user"}, {"content", "Tell me a story."}}});
  r.sampling.temperature = 0;
  r.max_tokens = 10;
  Generation plain(*svc_, r);
  const json full = json::parse(run_to_completion(plain));
  EXPECT_EQ(full["object"], "chat.completion");
  r.stream = true;
  Generation g(*svc_, r);
  const std::string body = stream_all(g);
  EXPECT_EQ(streamed_text(body), full["choices"][0]["message"]["content"]);
  EXPECT_NE(body.find("\"role\":\"assistant\""), std::string::npos);
  // The prompt: BOS once, then the ChatML text.
  const auto ids = chat_->tokenize(r.messages, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], tok_->bos());
  EXPECT_NE(ids[1], tok_->bos());
  EXPECT_EQ(full["usage"]["prompt_tokens"], ids.size());
}

TEST_F(ServerGeneration, ClientThatLeavesIsCancelledAndFreesBlocks) {
  start();
  engine_->start();
  GenerationRequest r = completion("Once upon a time", 200);
  r.ignore_eos = true;
  r.stream = true;
  {
    auto g = std::make_unique<Generation>(*svc_, r);
    Wakeup w;
    g->set_listener(w.listener());
    std::string body;
    auto events = [&] {
      size_t n = 0;
      for (size_t pos = 0; (pos = body.find("data: {", pos)) != std::string::npos; ++pos) ++n;
      return n;
    };
    while (events() < 3) {
      ASSERT_FALSE(g->pull_events(body));
      w.wait();
    }
    g.reset();  // the client left after three events
  }
  EXPECT_TRUE(all_blocks_free()) << engine_->free_blocks() << " of " << engine_->num_blocks() << " free";
  EXPECT_EQ(engine_->metrics().requests_cancelled.load(), 1u);
}

TEST_F(ServerGeneration, DestroyingCancels) {
  start();
  engine_->start();
  GenerationRequest r = completion("Once upon a time", 200);
  r.ignore_eos = true;
  { Generation g(*svc_, r); }
  EXPECT_TRUE(all_blocks_free());
}

TEST_F(ServerGeneration, BadRequestsAreApiErrors) {
  start();
  auto status_of = [&](const GenerationRequest& r) {
    try {
      Generation g(*svc_, r);
    } catch (const ApiError& e) {
      return std::make_pair(e.status(), std::string(e.what()));
    }
    return std::make_pair(0, std::string());
  };
  auto [s1, m1] = status_of(completion("Once upon a time", 1000));  // context is 256
  EXPECT_EQ(s1, 400);
  EXPECT_NE(m1.find("256"), std::string::npos) << m1;
  EXPECT_NE(m1.find("1000"), std::string::npos) << m1;

  GenerationRequest ids = completion("", 4);
  ids.prompts[0] = PromptInput{true, "", {1, 100000}};
  EXPECT_EQ(status_of(ids).first, 400);

  GenerationRequest min = completion("x", 4);
  min.min_tokens = 5;
  EXPECT_EQ(status_of(min).first, 400);

  GenerationRequest bias = completion("x", 4);
  bias.logit_bias = {{3, 1.0f}, {tok_->n_vocab(), 1.0f}};
  auto [s2, m2] = status_of(bias);
  EXPECT_EQ(s2, 400);
  EXPECT_NE(m2.find(std::to_string(tok_->n_vocab())), std::string::npos) << m2;
  EXPECT_TRUE(all_blocks_free());
}

// /tokenize gives the very ids a completion or chat completion is given;
// /detokenize gives the text back, special tokens rendered.
TEST_F(ServerGeneration, TokenizeGivesThePromptsOfGenerations) {
  start();
  TokenizeRequest t;
  t.chat = true;
  t.messages = Json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi </s>"}}});
  GenerationRequest chat;
  chat.endpoint = Endpoint::ChatCompletions;
  chat.messages = t.messages;
  const std::vector<int32_t> chat_ids = tokenize_request(*svc_, t);
  EXPECT_EQ(chat_ids, build_engine_requests(*svc_, chat)[0].prompt);
  EXPECT_EQ(std::count(chat_ids.begin(), chat_ids.end(), tok_->eos()), 0);  // the user's "</s>" is text
  t.add_generation_prompt = chat.add_generation_prompt = false;
  EXPECT_EQ(tokenize_request(*svc_, t), build_engine_requests(*svc_, chat)[0].prompt);
  EXPECT_LT(tokenize_request(*svc_, t).size(), chat_ids.size());

  TokenizeRequest p;
  p.prompt = "Once upon a time</s>";
  const std::vector<int32_t> ids = tokenize_request(*svc_, p);
  EXPECT_EQ(ids, build_engine_requests(*svc_, completion(p.prompt, 1))[0].prompt);
  EXPECT_EQ(ids.front(), tok_->bos());
  EXPECT_EQ(ids.back(), tok_->eos());  // a completions prompt parses special tokens
  p.add_special_tokens = false;
  EXPECT_EQ(tokenize_request(*svc_, p), std::vector<int32_t>(ids.begin() + 1, ids.end()));

  DetokenizeRequest d;
  d.tokens = ids;
  EXPECT_EQ(detokenize_request(*svc_, d), "<s>" + std::string(" Once upon a time</s>"));
  d.tokens = {1, tok_->n_vocab()};
  try {
    detokenize_request(*svc_, d);
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "tokens");
  }
}

TEST_F(ServerGeneration, ChatDefaultMaxTokensFillsTheContext) {
  start();
  GenerationRequest r;
  r.endpoint = Endpoint::ChatCompletions;
  r.messages = Json::array({{{"role", "user"}, {"content", "Hi"}}});
  const auto reqs = build_engine_requests(*svc_, r);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].max_tokens + int32_t(reqs[0].prompt.size()), 256);
  EXPECT_NE(reqs[0].sampling.seed, build_engine_requests(*svc_, r)[0].sampling.seed);  // fresh seeds
}

TEST_F(ServerGeneration, BrokenChatTemplatesGive400) {
  for (const std::string& source : {std::string("{% for m in messages %}{{ m.content }"),  // syntax error
                                   std::string("{{ raise_exception('no system role allowed') }}")}) {
    start(64, source);
    GenerationRequest r;
    r.endpoint = Endpoint::ChatCompletions;
    r.messages = Json::array({{{"role", "user"}, {"content", "Hi"}}});
    try {
      Generation g(*svc_, r);
      ADD_FAILURE() << "no error for " << source;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << e.what();
      EXPECT_EQ(e.code(), "chat_template_error");
      if (source.find("raise") != std::string::npos) {
        EXPECT_NE(std::string(e.what()).find("no system role allowed"), std::string::npos) << e.what();
      }
    }
    TearDown();
  }
}

TEST_F(ServerGeneration, FullQueueIs503AndCancelsTheRest) {
  // One sequence slot and one queue place admit two requests; the third is
  // refused. Not started: the admitted requests stay outstanding.
  start(/*max_queue=*/1, ChatTemplate::chatml_source(), /*max_num_seqs=*/1);
  GenerationRequest r = completion("Once", 4);
  for (int i = 0; i < 3; ++i) r.prompts.push_back(r.prompts[0]);
  try {
    Generation g(*svc_, r);
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.code(), "queue_full");
  }
  engine_->start();
  EXPECT_TRUE(all_blocks_free());
  EXPECT_EQ(engine_->metrics().requests_cancelled.load(), 2u);
}

}  // namespace
}  // namespace rf::server

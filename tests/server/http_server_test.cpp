// HttpServer (src/server/http_server.h) in process, over a raw socket: it
// answers 503 (OpenAI error body, Retry-After) while the model is loading,
// serves once a ModelService is set, answers 503 again while draining, and
// refuses a port that is taken.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/model_service.h"
#include "testdata.h"

namespace rf::server {
namespace {

struct HttpReply {
  int status = 0;
  std::string head, body;
};

// One request on a fresh connection (Connection: close), read to EOF.
HttpReply http(int port, const std::string& method, const std::string& path, const std::string& body = "") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  HttpReply r;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return r;
  }
  const std::string req = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" +
                          "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
  (void)!write(fd, req.data(), req.size());
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) all.append(buf, size_t(n));
  close(fd);
  const size_t sep = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.1 ", 0) != 0 || sep == std::string::npos) return r;
  r.status = std::stoi(all.substr(9, 3));
  r.head = all.substr(0, sep);
  r.body = all.substr(sep + 4);
  return r;
}

TEST(ServerHttp, LoadingThenReadyThenDraining) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  HttpOptions opts;
  opts.port = 0;
  HttpServer server(opts);
  server.start();
  ASSERT_GT(server.port(), 0);
  const int port = server.port();

  // Loading: 503 with the OpenAI error shape and Retry-After.
  HttpReply health = http(port, "GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.head.find("Retry-After"), std::string::npos) << health.head;
  const auto err = nlohmann::json::parse(health.body);
  EXPECT_EQ(err["error"]["code"], "model_loading");
  EXPECT_EQ(http(port, "POST", "/v1/completions", R"({"prompt":"x"})").status, 503);
  EXPECT_EQ(http(port, "GET", "/v1/models").status, 503);
  const HttpReply metrics = http(port, "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("rocmforge_server_ready 0"), std::string::npos);

  // Ready.
  CpuBackend backend(1);
  auto model = Model::load(test::testdata_path("stories260K.gguf"), backend, false);
  auto tok = Tokenizer::from_gguf(model->file());
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.max_model_len = 256;
  cfg.max_num_batched_tokens = 256;
  Engine engine(*model, *tok, backend, cfg);
  engine.start();
  ChatPrompt chat(*tok, ChatTemplate::chatml_source(), "ChatML");
  ModelService svc(engine, chat, {"stories260K"});
  server.set_service(&svc);
  EXPECT_EQ(http(port, "GET", "/health").status, 200);
  const HttpReply done = http(port, "POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":3})");
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(nlohmann::json::parse(done.body)["usage"]["completion_tokens"], 3);
  EXPECT_NE(http(port, "GET", "/metrics").body.find("rocmforge_server_ready 1"), std::string::npos);

  // Draining.
  server.begin_shutdown();
  const HttpReply drain = http(port, "POST", "/v1/completions", R"({"prompt":"x"})");
  EXPECT_EQ(drain.status, 503);
  EXPECT_EQ(nlohmann::json::parse(drain.body)["error"]["code"], "shutting_down");
  EXPECT_EQ(http(port, "GET", "/health").status, 503);
  EXPECT_TRUE(server.wait_idle(std::chrono::seconds(5)));
  svc.mark_stopping();
  engine.stop();
  server.stop();
  EXPECT_FALSE(server.listening());
  EXPECT_EQ(http(port, "GET", "/health").status, 0);  // nobody listens
}

TEST(ServerHttp, ATakenPortIsAnError) {
  HttpOptions opts;
  opts.port = 0;
  HttpServer first(opts);
  first.start();
  HttpOptions same = opts;
  same.port = first.port();
  HttpServer second(same);
  EXPECT_THROW(second.start(), Error);
}

}  // namespace
}  // namespace rf::server

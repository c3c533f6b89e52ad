// ApiKey (src/server/api_key.h): which Authorization values it accepts, and
// that the time of a check depends on neither the key's length nor how
// much of it a guess gets right.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/error.h"
#include "server/api_key.h"

namespace rf::server {
namespace {

TEST(ServerApiKey, AcceptsOnlyTheBearerKey) {
  const ApiKey none("");
  EXPECT_FALSE(none.required());
  EXPECT_TRUE(none.accepts(""));
  const ApiKey key("sk-test-123");
  EXPECT_TRUE(key.required());
  EXPECT_TRUE(key.accepts("Bearer sk-test-123"));
  EXPECT_TRUE(key.accepts("bearer sk-test-123"));
  for (const char* bad : {"", "Bearer", "Bearer ", "Bearer sk-test-12", "Bearer sk-test-1234", "Bearer sk-test-124",
                          "Basic sk-test-123", "sk-test-123", "Bearer  sk-test-123", "Bearer sk-test-123 "})
    EXPECT_FALSE(key.accepts(bad)) << bad;
  EXPECT_FALSE(key.accepts("Bearer " + std::string(5000, 'x')));
  const std::string nul("sk-test-123\0", 12);
  EXPECT_FALSE(key.accepts("Bearer " + nul));
  EXPECT_THROW(ApiKey(std::string(ApiKey::kMaxBytes + 1, 'k')), Error);
  EXPECT_TRUE(ApiKey(std::string(ApiKey::kMaxBytes, 'k')).accepts("Bearer " + std::string(ApiKey::kMaxBytes, 'k')));
}

// Fastest of several rounds of many checks: noise only adds time.
double seconds_for(const ApiKey& key, const std::string& header) {
  double best = 1e9;
  for (int round = 0; round < 7; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    int accepted = 0;
    for (int i = 0; i < 4000; ++i) accepted += key.accepts(header);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    EXPECT_EQ(accepted, 0);
  }
  return best;
}

TEST(ServerApiKey, TimeDoesNotDependOnTheKey) {
  const ApiKey short_key("k");
  const ApiKey long_key(std::string(900, 'k'));
  const std::string guess = "Bearer " + std::string(32, 'g');
  // A comparison that stopped at the first difference or at a length
  // mismatch would take ~900x longer for the second pair than the first.
  const double a = seconds_for(short_key, guess);
  const double b = seconds_for(long_key, guess);
  const double c = seconds_for(long_key, "Bearer " + std::string(899, 'k') + "x");  // right but for the last byte
  EXPECT_LT(std::max({a, b, c}) / std::min({a, b, c}), 3.0) << a << " " << b << " " << c;
}

}  // namespace
}  // namespace rf::server

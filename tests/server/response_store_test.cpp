// ResponseStore (server/response_store.h): entries kept within the byte
// capacity (id and both texts counted), the least recently used dropped
// first, a read making an entry the most recent, replacing and erasing,
// an entry larger than the capacity not kept, capacity 0 keeping nothing.
#include <gtest/gtest.h>

#include "server/response_store.h"

namespace rf::server {
namespace {

ResponseStore::Entry entry(size_t conversation, size_t response) {
  return ResponseStore::Entry{std::string(conversation, 'c'), std::string(response, 'r')};
}

TEST(ResponseStore, LeastRecentlyUsedGoFirstWithinTheBytes) {
  ResponseStore s(100);  // ids of 2 bytes: each entry below is 2 + 28 = 30 bytes
  s.put("r1", entry(20, 8));
  s.put("r2", entry(20, 8));
  s.put("r3", entry(20, 8));
  EXPECT_EQ(s.bytes(), 90u);
  ASSERT_TRUE(s.get("r1"));  // now the most recent: r2 is the oldest
  s.put("r4", entry(20, 8));
  EXPECT_FALSE(s.get("r2"));
  EXPECT_TRUE(s.get("r1") && s.get("r3") && s.get("r4"));
  EXPECT_EQ(s.evictions(), 1u);
  EXPECT_EQ(s.get("r3")->conversation, std::string(20, 'c'));
  s.put("r3", entry(50, 10));  // replaced: 62 bytes; r1 (older than r4) goes
  EXPECT_EQ(s.get("r3")->response, std::string(10, 'r'));
  EXPECT_FALSE(s.get("r1"));
  EXPECT_EQ(s.bytes(), 92u);
  EXPECT_TRUE(s.erase("r4"));
  EXPECT_FALSE(s.erase("r4"));
  EXPECT_EQ(s.size(), 1u);
  s.put("big", entry(90, 10));  // over the whole capacity: not kept, nothing dropped for it
  EXPECT_FALSE(s.get("big"));
  EXPECT_TRUE(s.get("r3"));
}

TEST(ResponseStore, CapacityZeroKeepsNothing) {
  ResponseStore s(0);
  EXPECT_FALSE(s.enabled());
  s.put("r", entry(1, 1));
  EXPECT_FALSE(s.get("r"));
  EXPECT_EQ(s.bytes(), 0u);
}

}  // namespace
}  // namespace rf::server

// RequestStream's listener (engine/request.h): called after every push, at
// once when events already wait, never after it was removed.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/request.h"

namespace rf {
namespace {

StreamEvent text_event(const char* text) {
  StreamEvent ev;
  ev.text = text;
  return ev;
}

TEST(RequestStream, ListenerIsToldOfEveryEvent) {
  RequestStream s(1);
  std::atomic<int> calls{0};
  s.set_listener([&] { ++calls; });
  EXPECT_EQ(calls, 0);  // nothing waits
  s.push(text_event("a"));
  s.push(text_event("b"));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(s.next(std::chrono::milliseconds(0))->text, "a");
  EXPECT_EQ(s.next(std::chrono::milliseconds(0))->text, "b");
  EXPECT_FALSE(s.next(std::chrono::milliseconds(0)));
  s.set_listener(nullptr);
  s.push(text_event("c"));
  EXPECT_EQ(calls, 2);
  // Set while an event waits: called at once.
  std::atomic<int> late{0};
  s.set_listener([&] { ++late; });
  EXPECT_EQ(late, 1);
  StreamEvent end;
  end.finished = true;
  s.push(end);
  EXPECT_EQ(late, 2);
  s.push(text_event("after the end"));  // dropped, nobody told
  EXPECT_EQ(late, 2);
}

}  // namespace
}  // namespace rf

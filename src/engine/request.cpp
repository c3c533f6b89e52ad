// RequestStream: a mutex-guarded queue of events between the engine thread
// and one consumer.
#include "engine/request.h"

namespace rf {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
    default: return "none";
  }
}

std::optional<StreamEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] { return !events_.empty(); };
  if (timeout == std::chrono::milliseconds::max()) {
    cv_.wait(lock, ready);
  } else if (timeout <= std::chrono::milliseconds::zero()) {
    // A poll: no timed wait (one costs a futex call that can yield the
    // thread: ~40 us each on a busy 2-core machine, paid per sequence per
    // step by a caller that polls every stream between steps).
    if (!ready()) return std::nullopt;
  } else if (!cv_.wait_for(lock, timeout, ready)) {
    return std::nullopt;
  }
  StreamEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void RequestStream::push(StreamEvent ev) {
  if (const Listener listener = push_quiet(std::move(ev))) (*listener)();
}

RequestStream::Listener RequestStream::push_quiet(StreamEvent ev) {
  Listener listener;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return nullptr;
    done_ = ev.finished;
    events_.push_back(std::move(ev));
    listener = listener_;
  }
  cv_.notify_all();
  return listener;
}

void RequestStream::set_listener(std::function<void()> fn) {
  std::shared_ptr<const std::function<void()>> now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listener_ = fn ? std::make_shared<const std::function<void()>>(std::move(fn)) : nullptr;
    if (!events_.empty()) now = listener_;
  }
  if (now) (*now)();
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

}  // namespace rf

// PendingWork: an API request the engine is working on, as the HTTP side
// drives it (server/api_routes.cpp): a listener says there is news, then
// the ready part is pulled — stream events, or the whole body at the end.
// Generation (server/generation.h) and embeddings (server/embeddings.h) are
// the two kinds. Destroying one cancels what it still runs.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace rf::server {

class PendingWork {
 public:
  virtual ~PendingWork() = default;
  // `fn` runs (on the engine thread) whenever there is news; it must be quick.
  virtual void set_listener(std::function<void()> fn) = 0;
  // Non-streamed: the body once done, nullopt before; throws ApiError.
  virtual std::optional<std::string> pull_result() = 0;
  // Non-streamed, nothing came for a while: throws ApiError 503 once the
  // server is stopping.
  virtual void check_stopping() const = 0;
  // Streamed: appends the events that are ready; true once the stream ended.
  virtual bool pull_events(std::string& out) = 0;
  // Streamed, nothing sent for a while: a keep-alive, or the end.
  virtual bool idle_events(std::string& out) = 0;
};

}  // namespace rf::server

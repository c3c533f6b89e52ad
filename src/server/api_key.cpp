// ApiKey: a comparison whose time depends on neither input.
#include "server/api_key.h"

#include <cstring>

#include "core/error.h"

namespace rf::server {

ApiKey::ApiKey(const std::string& key) : required_(!key.empty()), length_(key.size()) {
  if (key.size() > kMaxBytes) fail("the API key is longer than ", kMaxBytes, " bytes");
  std::memcpy(padded_.data(), key.data(), key.size());
}

bool ApiKey::accepts(std::string_view authorization) const {
  if (!required_) return true;
  // The scheme and the size of what was presented are the client's own.
  if (authorization.size() < 7) return false;
  std::string_view scheme = authorization.substr(0, 7);
  if (scheme != "Bearer " && scheme != "bearer " && scheme != "BEARER ") return false;
  return accepts_key(authorization.substr(7));
}

bool ApiKey::accepts_key(std::string_view presented) const {
  if (!required_) return true;
  if (presented.size() > kMaxBytes) return false;
  std::array<unsigned char, kMaxBytes> given{};
  std::memcpy(given.data(), presented.data(), presented.size());
  // Every byte of both padded buffers, and the lengths, folded without branches.
  unsigned diff = unsigned(presented.size() != length_);
  for (size_t i = 0; i < kMaxBytes; ++i) diff |= unsigned(given[i] ^ padded_[i]);
  return diff == 0;
}

}  // namespace rf::server

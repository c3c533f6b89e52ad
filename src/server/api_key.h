// ApiKey: the server's API key and the check of a request's Authorization
// header against it. The comparison takes the same time whatever the key and
// whatever is presented (both are padded to a fixed size and every byte is
// compared), so timing reveals neither the key's bytes nor its length.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace rf::server {

class ApiKey {
 public:
  static constexpr size_t kMaxBytes = 1024;  // longer keys are refused at start-up

  // "" means no key: every request is accepted. Throws rf::Error for a key
  // longer than kMaxBytes.
  explicit ApiKey(const std::string& key);

  bool required() const { return required_; }
  // True for "Bearer KEY" (the scheme case-insensitive) with the right key.
  bool accepts(std::string_view authorization) const;
  // True for the key itself (an `x-api-key` header, Anthropic's way).
  bool accepts_key(std::string_view presented) const;

 private:
  bool required_ = false;
  size_t length_ = 0;
  std::array<unsigned char, kMaxBytes> padded_{};
};

}  // namespace rf::server

// Pooling: how an embedding request turns a prompt's final hidden states
// (after the model's output norm) into one vector — llama.cpp's
// `<arch>.pooling_type` values (0 none, 1 mean, 2 cls, 3 last; 4 rank is a
// reranker's and not an embedding). None marks a generation request.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rf {

enum class Pooling : int32_t { None = 0, Mean = 1, Cls = 2, Last = 3 };

inline const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
    default: return "none";
  }
}

// "mean" | "cls" | "last" -> the pooling; anything else -> nullopt.
inline std::optional<Pooling> pooling_from_name(std::string_view s) {
  if (s == "mean") return Pooling::Mean;
  if (s == "cls") return Pooling::Cls;
  if (s == "last") return Pooling::Last;
  return std::nullopt;
}

}  // namespace rf

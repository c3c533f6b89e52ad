// ModelService: names, ids and seeds.
#include "server/model_service.h"

#include <chrono>
#include <cstdio>
#include <random>


namespace rf::server {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

ModelService::ModelService(ServingEngine& engine, const ChatPrompt& chat, std::vector<std::string> names,
                           ServiceOptions options)
    : engine_(engine), chat_(chat), names_(std::move(names)), options_(options),
      responses_(options.responses_store_bytes) {
  if (names_.empty()) names_.push_back("model");
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::random_device rd;
  id_base_ = (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(created_);
}

bool ModelService::answers_to(const std::string& model) const {
  for (const auto& n : names_)
    if (n == model) return true;
  return false;
}

std::string ModelService::next_id(const char* prefix, char sep) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%c%016llx", prefix, sep, (unsigned long long)mix64(id_base_ + counter_.fetch_add(1)));
  return buf;
}

uint64_t ModelService::next_seed() { return mix64(id_base_ ^ (counter_.fetch_add(1) * 0xD1B54A32D192ED03ull)); }

}  // namespace rf::server

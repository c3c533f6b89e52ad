// Automaton (see automaton.h): state interning and lazily filled transitions.
#include "grammar/automaton.h"

#include <algorithm>
#include <optional>

namespace rf::grammar {

Automaton::Automaton(const Matcher& m) : m_(m) {}

int32_t Automaton::intern(const State& s) {
  std::string key = s.key();
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  const int32_t id = int32_t(states_.size());
  size_t stacks = 0;
  for (const Stack& st : s.stacks) stacks += sizeof(Stack) + st.size() * sizeof(uint32_t);
  // the key twice (map and hash node), the state, the transition row
  memory_ += 2 * key.size() + 64 + sizeof(State) + stacks + 256 * sizeof(int32_t);
  ids_.emplace(std::move(key), id);
  states_.push_back(s);
  accepting_.push_back(m_.is_accepting(s) ? 1 : 0);
  auto row = std::make_unique_for_overwrite<int32_t[]>(256);
  std::fill_n(row.get(), 256, kUnknown);
  next_.push_back(std::move(row));
  return id;
}

int32_t Automaton::compute_step(int32_t id, uint8_t byte) {
  std::optional<State> s = m_.accept_byte(states_[size_t(id)], byte);
  const int32_t t = s ? intern(*s) : kDead;
  next_[size_t(id)][byte] = t;
  return t;
}

int32_t Automaton::step(int32_t id, std::string_view bytes) {
  for (char c : bytes) {
    id = step(id, uint8_t(c));
    if (id == kDead) return kDead;
  }
  return id;
}

void Automaton::clear() {
  states_.clear();
  accepting_.clear();
  next_.clear();
  ids_.clear();
  memory_ = 0;
  ++generation_;
}

}  // namespace rf::grammar

// Automaton: a Matcher's states turned into a byte automaton built lazily.
// Each distinct State met gets an id (interned by State::key()); the
// transition from an id on a byte is computed by the matcher the first time
// it is asked for and then read from a table, so a trie walk over a large
// vocabulary costs one table lookup per trie edge once the states it meets
// are known. Grammars with nesting have unboundedly many states: the table
// grows with the states actually met, and clear() forgets them all (callers
// keep their State values and intern them again; ids die with clear()).
// Not thread-safe (the engine thread owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace rf::grammar {

class Automaton {
 public:
  static constexpr int32_t kDead = -1;  // the grammar rejects the byte

  explicit Automaton(const Matcher& m);

  const Matcher& matcher() const { return m_; }
  // The id of `s`, adding it when new.
  int32_t intern(const State& s);
  // The state after `byte` (or `bytes`) from state `id`, or kDead.
  int32_t step(int32_t id, uint8_t byte) {
    const int32_t t = next_[size_t(id)][byte];
    return t != kUnknown ? t : compute_step(id, byte);
  }
  int32_t step(int32_t id, std::string_view bytes);
  bool accepting(int32_t id) const { return accepting_[size_t(id)] != 0; }
  const State& state(int32_t id) const { return states_[size_t(id)]; }

  size_t size() const { return states_.size(); }
  size_t memory_bytes() const { return memory_; }  // about
  // Forgets every state; ids from before are invalid. generation() counts
  // the clears, so holders of an id can tell whether it is still valid.
  void clear();
  uint64_t generation() const { return generation_; }

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t compute_step(int32_t id, uint8_t byte);

  const Matcher& m_;
  std::vector<State> states_;
  std::vector<uint8_t> accepting_;
  // next_[state][byte]: id, kDead or kUnknown (a row per state: growing
  // never copies the table)
  std::vector<std::unique_ptr<int32_t[]>> next_;
  std::unordered_map<std::string, int32_t> ids_;
  size_t memory_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace rf::grammar

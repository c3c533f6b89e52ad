// Scheduler: prefix-cache hits at admission, over the KV groups (see
// scheduler.h). Block i of the prompt is cached in group g under
// BlockPool::group_key(chain hash of blocks 0..i, g). A hit of h blocks
// means the first computed query is at position h * block_size: every full
// group must hold blocks [0, h) and every window group the blocks of that
// query's window, [first_needed_block(window, h * bs), h); a window group's
// earlier entries stay null. h is the largest such count, at most the
// leading run cached in every full group, and always leaves the last token
// to compute (its logits are needed). Hybrid models also need the state at
// h * block_size: h is shortened until a checkpoint is cached under the key
// of block h - 1 (or h is 0), and that checkpoint is restored into the
// sequence's slot. Also here: where hybrid models' chunks are cut and their
// checkpoints saved.
#include <algorithm>

#include "core/error.h"
#include "engine/scheduler.h"

namespace rf {

void Scheduler::apply_prefix_hits(Sequence* seq) {
  const int32_t bs = pool_.block_size();
  const int32_t max_blocks = (seq->n_tokens() - 1) / bs;
  auto cached = [&](int32_t g, int32_t i) {
    return pool_.find(BlockPool::group_key(hashes_[size_t(i)], g)).has_value();
  };
  // The leading blocks every full group has cached (their chain hashes).
  hashes_.clear();
  uint64_t h = 0;
  for (int32_t i = 0; i < max_blocks; ++i) {
    h = BlockPool::chain_hash(h, std::span<const int32_t>(seq->tokens.data() + size_t(i) * bs, size_t(bs)));
    hashes_.push_back(h);
    bool all = true;
    for (int32_t g = 0; g < n_groups() && all; ++g)
      if (config_.group_windows[size_t(g)] == 0) all = cached(g, i);
    if (!all) {
      hashes_.pop_back();
      break;
    }
  }
  // Shortened until every window group has the first query's window. A
  // missing block i lies in the window of every hit from i + 1 up to the
  // current one (shorter hits' windows start no later), so the search
  // resumes at hit = i. With recurrent state, also until the hit ends on a
  // checkpoint.
  int32_t hit = int32_t(hashes_.size());
  std::optional<int32_t> checkpoint;
  for (bool settled = false; !settled;) {
    settled = true;
    if (state_) {
      while (hit > 0 && !(checkpoint = checkpoints() ? state_->find(checkpoint_key(hashes_[size_t(hit) - 1]))
                                                     : std::nullopt))
        --hit;
    }
    for (int32_t g = 0; g < n_groups() && settled; ++g) {
      const int32_t w = config_.group_windows[size_t(g)];
      if (w == 0) continue;
      for (int32_t i = hit - 1; i >= first_needed_block(w, hit * bs, bs); --i)
        if (!cached(g, i)) {
          hit = i;
          settled = false;
          break;
        }
    }
  }
  for (int32_t g = 0; g < n_groups(); ++g) {
    BlockTable& t = seq->tables[size_t(g)];
    const int32_t first = first_needed_block(config_.group_windows[size_t(g)], hit * bs, bs);
    t.blocks.assign(size_t(first), kNullBlock);
    t.first_live = first;
    for (int32_t i = first; i < hit; ++i) {
      const auto b = pool_.lookup(BlockPool::group_key(hashes_[size_t(i)], g));
      RF_CHECK(b.has_value(), "scheduler: prefix block ", i, " of group ", g, " vanished");
      t.blocks.push_back(*b);
    }
  }
  seq->n_computed = seq->n_cached = hit * bs;
  seq->n_hashed_blocks = hit;
  seq->last_hash = hit > 0 ? hashes_[size_t(hit) - 1] : 0;
  if (state_ && hit > 0) {
    seq->state_load = *checkpoint;
    state_->touch(*checkpoint);
  }
}

int32_t Scheduler::cut_for_checkpoint(const Sequence* seq, int32_t n_new) const {
  if (!checkpoints()) return n_new;
  const int32_t bs = pool_.block_size();
  const int32_t boundary = (seq->n_tokens() - 1) / bs * bs;  // where a repeat of these tokens hits
  if (boundary > seq->n_computed && boundary < seq->n_computed + n_new) return boundary - seq->n_computed;
  return n_new;
}

int32_t Scheduler::plan_checkpoint(Sequence* seq, int32_t end) {
  const int32_t bs = pool_.block_size();
  if (!checkpoints() || end == 0 || end % bs != 0) return -1;
  // The chain hash of blocks [0, end / bs), on from what complete() hashed.
  uint64_t h = seq->last_hash;
  for (int32_t i = seq->n_hashed_blocks; i < end / bs; ++i)
    h = BlockPool::chain_hash(h, std::span<const int32_t>(seq->tokens.data() + size_t(i) * bs, size_t(bs)));
  const uint64_t key = checkpoint_key(h);
  if (state_->find(key)) return -1;  // this prefix's state is saved already
  const int32_t row = state_->reserve();
  if (row < 0) return -1;
  seq->pending_checkpoint = row;
  seq->pending_key = key;
  return row;
}

}  // namespace rf

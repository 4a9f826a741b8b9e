// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [straggler detection] (diag/straggler.h), one communicator's part.
#include "diag/straggler_detector.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>

#include "base/logging.h"
#include "diag/trace.h"

namespace gradwire::straggler {

Detector::Detector(Config config)
    : config_(std::move(config)),
      recorder_(fr::Recorder::instance()),
      log_(config_.window.count() > 0 && config_.size > 1 ? 4096 : 0),
      judge_(config_.threshold, config_.window) {}

bool Detector::enabled() const {
  return config_.window.count() > 0 && config_.size > 1 && recorder_.enabled();
}

void Detector::set_callback(StragglerCallback callback) {
  std::lock_guard<std::mutex> lk(mu_);
  callback_ = std::move(callback);
}

std::vector<StragglerReport> Detector::named() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<StragglerReport> out;
  for (const Named& n : named_) out.push_back(report(n, true, config_.threshold));
  return out;
}

double Detector::max_share() const {
  std::lock_guard<std::mutex> lk(mu_);
  return max_share_;
}

std::string Detector::board_key() const {
  return fmt::format("gradwire/straggler/{}/board", config_.comm);
}

std::string Detector::answer_key(int rank) const {
  return fmt::format("gradwire/straggler/{}/{}", config_.comm, rank);
}

void Detector::harvest(int64_t last_started) {
  if (!enabled() || last_started <= log_.last()) return;
  scratch_.clear();
  recorder_.completed(config_.fr_comm, log_.last(), scratch_);
  std::sort(scratch_.begin(), scratch_.end(),
            [](const fr::Recorder::Done& a, const fr::Recorder::Done& b) { return a.seq < b.seq; });
  for (const auto& d : scratch_) log_.add(d.seq, d.op, d.done_us - d.started_us);
}

void Detector::round(bootstrap::Store& store) {
  if (!enabled()) return;
  if (config_.rank == 0) {
    judge(store);
    return;
  }
  const auto text = store.try_get(board_key());
  if (!text) return;  // rank 0 has not asked yet
  const auto board = parse_board(*text);
  if (!board) {
    log().debug("rank {}: ignoring a malformed straggler board ({} bytes)", config_.rank,
                text->size());
    return;
  }
  answer(store, *board);
  adopt(board->named, {});
}

void Detector::answer(bootstrap::Store& store, const Board& board) {
  std::vector<Answer> out;
  for (const Ask& a : board.asks) {
    if (log_.last() + 1 < int64_t(a.end)) continue;  // not completed here yet
    const WaitLog::Sum s = log_.sum(a.first, a.end);
    out.push_back({a.id, s.wait_us, s.seen});
  }
  std::string text = encode(out);
  if (text == published_) return;
  store.set(answer_key(config_.rank), text);
  published_ = std::move(text);
}

void Detector::judge(bootstrap::Store& store) {
  using namespace std::chrono;
  const auto now = steady_clock::now();
  if (!asks_.empty()) {
    // Every rank's answers, by ask id (rank 0's own from its log).
    std::vector<std::map<uint64_t, Answer>> by_rank(size_t(config_.size));
    for (const Pending& p : asks_) {
      if (log_.last() + 1 < int64_t(p.ask.end)) continue;
      const WaitLog::Sum s = log_.sum(p.ask.first, p.ask.end);
      by_rank[0][p.ask.id] = Answer{p.ask.id, s.wait_us, s.seen};
    }
    for (int r = 1; r < config_.size; ++r) {
      const auto text = store.try_get(answer_key(r));
      if (!text) continue;
      const auto answers = parse_answers(*text);
      if (!answers) {
        log().debug("rank 0: ignoring rank {}'s malformed straggler answers", r);
        continue;
      }
      for (const Answer& a : *answers) by_rank[size_t(r)][a.id] = a;
    }
    for (auto it = asks_.begin(); it != asks_.end();) {
      std::vector<Answer> answers;
      for (const auto& m : by_rank) {
        auto found = m.find(it->ask.id);
        if (found == m.end()) break;
        answers.push_back(found->second);
      }
      if (answers.size() != size_t(config_.size)) {
        ++it;
        continue;
      }
      const uint32_t count = it->ask.end - it->ask.first;
      if (auto late = lateness(answers, count)) {
        Window w;
        w.first = it->ask.first;
        w.end = it->ask.end;
        w.seconds = it->seconds;
        w.ops = log_.sum(w.first, w.end).ops;
        w.late_s = std::move(*late);
        judge_.add(std::move(w));
        ++judged_;
        // The balanced test's evidence that windows were judged at all.
        double top = 0;
        int top_rank = 0;
        for (const Named& n : judge_.standings()) {
          if (n.share > top) top = n.share, top_rank = n.rank;
        }
        log().debug("rank 0: straggler window {} judged (#{}-#{}, {:.2f} s); highest share: rank "
                    "{} {:.1f}%", judged_, it->ask.first, it->ask.end - 1, it->seconds, top_rank,
                    top * 100);
      }
      it = asks_.erase(it);
    }
  }
  // The next ask: what rank 0 completed since the last one. Time without
  // collectives counts too (nobody was late in it).
  const int64_t last = log_.last();
  if (next_first_ < 0) {
    next_first_ = last + 1;
    last_ask_ = now;
  } else if (last + 1 > next_first_) {
    asks_.push_back({Ask{next_ask_++, uint32_t(next_first_), uint32_t(last + 1)},
                     duration<double>(now - last_ask_).count()});
    next_first_ = last + 1;
    last_ask_ = now;
    while (asks_.size() > kMaxAsks) {
      log().debug("rank 0: straggler window #{}-#{} dropped: not every rank answered it",
                  asks_.front().ask.first, asks_.front().ask.end - 1);
      asks_.pop_front();
    }
  }
  Board board;
  for (const Pending& p : asks_) board.asks.push_back(p.ask);
  board.named = judge_.verdict();
  const auto standings = judge_.standings();
  {
    std::lock_guard<std::mutex> lk(mu_);
    max_share_ = 0;
    for (const Named& n : standings) max_share_ = std::max(max_share_, n.share);
  }
  adopt(board.named, standings);
  std::string text = encode(board);
  if (text == published_) return;
  store.set(board_key(), text);
  published_ = std::move(text);
}

void Detector::adopt(const std::vector<Named>& named, const std::vector<Named>& standings) {
  std::lock_guard<std::mutex> lk(mu_);
  auto find = [](const std::vector<Named>& v, int rank) -> const Named* {
    for (const Named& n : v)
      if (n.rank == rank) return &n;
    return nullptr;
  };
  for (const Named& n : named) {
    if (!find(named_, n.rank)) to_deliver_.push_back(report(n, true, config_.threshold));
  }
  for (const Named& old : named_) {
    if (find(named, old.rank)) continue;
    const Named* now = find(standings, old.rank);
    to_deliver_.push_back(report(now ? *now : old, false, config_.threshold));
  }
  named_ = named;
}

void Detector::deliver() {
  std::vector<StragglerReport> events;
  StragglerCallback callback;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (to_deliver_.empty()) return;
    events.swap(to_deliver_);
    callback = callback_;
  }
  for (const StragglerReport& e : events) {
    // Rank 0 says it for the job, the named rank for its own log; the
    // others would only repeat it.
    if (config_.rank == 0 || e.rank == config_.rank) {
      if (e.named) log().warn("{}", e.message);
      else log().info("{}", e.message);
    } else {
      log().debug("{}", e.message);
    }
    trace::instant("stragglers",
                   fmt::format("{} {}", e.named ? "straggler: rank" : "caught up: rank", e.rank),
                   trace::now_us(), "\"report\": " + to_json(e));
    if (!callback) continue;
    try {
      callback(e);
    } catch (const std::exception& ex) {
      log().error("rank {}: the straggler callback threw: {}", config_.rank, ex.what());
    } catch (...) {
      log().error("rank {}: the straggler callback threw a non-standard exception", config_.rank);
    }
  }
}

}  // namespace gradwire::straggler

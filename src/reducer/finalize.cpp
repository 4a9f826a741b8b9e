// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The end of a step: unused parameters, waiting for the Buckets, the write
// back, and the one-time rebuild of the plan from the observed ready order.
#include <algorithm>
#include <cstring>
#include <set>

#include "base/raise.h"
#include "diag/trace.h"
#include "base/logging.h"
#include "reducer/reducer_impl.h"

namespace gradwire {

namespace {

// what() without its "gradwire <Code>: " prefix, so a wrapped message does
// not repeat it.
std::string bare_message(const Error& e) {
  std::string m = e.what();
  const std::string prefix = fmt::format("gradwire {}: ", to_string(e.code()));
  return m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m;
}

template <typename Names>
std::string join_names(const Names& names, size_t limit) {
  std::string out;
  size_t k = 0;
  for (const auto& n : names) {
    if (k == limit) return out + fmt::format(" and {} more", names.size() - limit);
    out += (k++ ? ", " : "") + n;
  }
  return out;
}

}  // namespace

// Note [unused parameters]: ranks must launch the same Buckets in the same
// order (Note [in-order launch]). With find_unused_parameters, finalize()
// marks every gradient still unmarked as zeros, so every Bucket launches on
// every rank whatever each rank's model used, and a parameter used only on
// some ranks gets the average over all (zeros from the others), as in c10d.
// Without it, a missing gradient means the Buckets from the first
// incomplete one on were never launched here. If every rank missed the same
// gradients, every rank launched the same prefix and all ranks fail here
// with the same message. If only some did, the others are waiting in a
// collective this rank never starts: they fail with their own Timeout at the
// communicator's deadline (naming the collective), while this rank reports
// the parameters, the root cause.
void Reducer::Impl::raise_unmarked(const std::vector<size_t>& unmarked) {
  size_t first_unlaunched;
  {
    std::lock_guard<std::mutex> lk(mu_);
    first_unlaunched = order_.next();
  }
  // Launched Buckets may still be in flight: let them finish (bounded by
  // the deadline) so nothing writes into the Buckets once we return.
  wait_launched_quietly();
  std::vector<std::string> names;
  for (size_t i : unmarked) names.push_back(name_of(i));
  const std::string w = where();
  const size_t nb = buckets_.size();
  reset_step();
  ++micro_step_;
  raise(ErrorCode::InvalidArgument,
        "{}: {} parameter{} got no gradient: {}; pass find_unused_parameters=true if the model "
        "does not use every parameter each step (Buckets {}..{} of {} were not launched on this "
        "rank; ranks that marked every gradient will time out waiting for them)",
        w, names.size(), names.size() == 1 ? "" : "s", join_names(names, 20), first_unlaunched,
        nb - 1, nb);
}

void Reducer::Impl::finalize(void* stream) {
  if (no_sync_depth_.load() > 0) return;
  if (!will_sync()) {
    ++micro_step_;
    return;
  }
  // A rebuild one step ago kept the old Buckets for stale views; the
  // adapter has re-fetched them by now (documented at bucket_view).
  retired_.clear();
  StepStats stats;
  stats.step = step_;
  stats.finalize_start = StepStats::TimePoint::clock::now();

  std::vector<size_t> unmarked;
  for (size_t i = 0; i < gradients_.size(); ++i) {
    if (gradients_[i].state.load(std::memory_order_acquire) == kUnmarked) unmarked.push_back(i);
  }
  if (!unmarked.empty()) {
    if (!options_.find_unused_parameters) raise_unmarked(unmarked);
    for (size_t i : unmarked) mark_unused(i);  // Note [unused parameters]
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    GW_CHECK(order_.all_launched(),
             "{}: only {} of {} Buckets launched after every gradient was ready (was "
             "finalize() called while mark_ready was still running?)",
             where(), order_.next(), buckets_.size());
  }

  // Wait for every Bucket, even after a failure, so none is in flight when
  // we return; report the first failure (later ones are usually Aborted
  // echoes of it).
  std::exception_ptr failure;
  size_t failed_bucket = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bk = *buckets_[b];
    std::exception_ptr err = bk.launch_error;
    if (!err) {
      try {
        bk.work.wait();
      } catch (...) {
        err = std::current_exception();
      }
    }
    if (err && !failure) {
      failure = err;
      failed_bucket = b;
    }
  }
  if (failure) {
    const std::string what = fmt::format("{}: {}", where(), describe_bucket(failed_bucket));
    reset_step();
    ++micro_step_;
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{} failed: {}", what, bare_message(e)));
    } catch (const std::exception& e) {
      raise(ErrorCode::Internal, "{} failed: {}", what, e.what());
    }
  }

  const int64_t first = first_ready_ns_.load();
  stats.first_ready = first ? StepStats::TimePoint(StepStats::TimePoint::duration(first))
                            : stats.finalize_start;
  for (auto& b : buckets_) {
    stats.bucket_launch.push_back(b->launched_at);
    stats.bucket_done.push_back(b->done_at);
    stats.bucket_bytes.push_back(b->data.size());
  }
  if (trace::enabled()) {
    // The timeline (diag/trace.h): per Bucket ready -> launch -> done (before
    // a rebuild replaces the Buckets).
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const Bucket& bk = *buckets_[b];
      const int64_t ready = trace::to_us(bk.ready_at), launch = trace::to_us(bk.launched_at);
      const std::string track = fmt::format("bucket {}", b);
      trace::span(track, "ready, waiting for earlier buckets", "bucket", ready, launch);
      trace::span(track, fmt::format("bucket {} in flight", b), "bucket", launch,
                  trace::to_us(bk.done_at), fmt::format("\"bytes\": {}", bk.data.size()));
    }
  }

  // The rebuild first: in sharded mode it makes every element of every
  // gradient available (Note [rebuild once]), and write_back then uses it.
  bool full_results = !options_.sharded;
  if (options_.rebuild_buckets && !rebuilt_) {
    try {
      full_results |= rebuild(stream);
    } catch (...) {
      reset_step();
      ++micro_step_;
      throw;
    }
  }
  write_back(full_results, stream);
  if (device_) device_->written(stream);
  reset_step();
  ++step_;
  ++micro_step_;
  stats.finalize_end = StepStats::TimePoint::clock::now();
  if (trace::enabled()) {
    // The timeline (diag/trace.h): the step, and per Bucket ready -> launch -> done.
    trace::span("reducer", fmt::format("step {}", stats.step), "step",
                trace::to_us(stats.first_ready), trace::to_us(stats.finalize_end));
    trace::span("reducer", "finalize", "step", trace::to_us(stats.finalize_start),
                trace::to_us(stats.finalize_end));
  }
  last_stats_ = std::move(stats);
}

void Reducer::Impl::copy_bytes(int device, void* dst, const void* src, size_t bytes,
                               void* stream) {
  if (device >= 0) {
    device_->copy(dst, src, bytes, stream);
  } else if (bytes && dst != src) {
    std::memcpy(dst, src, bytes);
  }
}

void Reducer::Impl::write_back(bool full_results, void* stream) {
  auto dest_of = [&](size_t i) -> std::byte* {
    const Gradient& g = gradients_[i];
    return static_cast<std::byte*>(g.step_dest ? g.step_dest : g.buffer);
  };
  if (!full_results) {
    // Only this rank's shard holds averages; copy the pieces it covers.
    for (auto& bk : buckets_) {
      const size_t es = element_size(bk->dtype);
      const std::byte* shard = bk->data.data() + bk->shard_offset * es;
      for (const auto& p : bk->pieces) {
        std::byte* dest = dest_of(p.gradient);
        const std::byte* src = shard + p.shard_offset * es;
        if (dest) copy_bytes(bk->device, dest + p.offset * es, src, p.count * es, stream);
      }
    }
    return;
  }
  for (size_t i = 0; i < gradients_.size(); ++i) {
    std::byte* dest = dest_of(i);
    const std::byte* src = slot(i);
    const size_t bytes = gradients_[i].info.elements * element_size(gradients_[i].info.dtype);
    if (dest) copy_bytes(gradients_[i].info.device.index(), dest, src, bytes, stream);
  }
}

// Note [rebuild once]: the initial plan guesses the ready order (reverse
// registration order); after the first synchronised step we know it. Only
// rank 0's observed order counts, broadcast with a fingerprint of the
// gradient list, so every rank computes the same plan even if its threads
// marked gradients in another order (a plan that differed between ranks
// would pair different Buckets in one collective). Done once, like c10d:
// later steps' orders vary with thread timing and re-planning would churn
// the bucket views. The step's results move to the new Buckets; in sharded
// mode a rank holds only its shard of each old Bucket, which no longer lines
// up with its new shards, so the old Buckets are first allgathered (once,
// about the cost of one step's communication): every new shard then holds
// the average, and so does every gradient after the write-back. Returns
// true if the plan changed and the results are complete everywhere.
bool Reducer::Impl::rebuild(void* stream) {
  rebuilt_ = true;
  const size_t n = gradients_.size();
  const uint64_t fingerprint = gradient_list_fingerprint(specs_);
  std::vector<int64_t> message(n + 1, 0);
  if (rank_ == 0) {
    std::vector<size_t> observed(ready_order_.begin(), ready_order_.begin() + ready_count_.load());
    const auto order = complete_ready_order(observed, n);
    message[0] = int64_t(fingerprint);
    for (size_t k = 0; k < n; ++k) message[k + 1] = int64_t(order[k]);
  }
  try {
    comm_.broadcast(message.data(), message.data(), n + 1, DataType::Int64, 0).wait();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: rebuilding the Buckets from rank 0's gradient order "
                                      "failed: {}", where(), bare_message(e)));
  }
  if (uint64_t(message[0]) != fingerprint) {
    raise(ErrorCode::Mismatch, "{}: the gradient list ({} gradients) differs from rank 0's "
          "(sizes or dtypes); every rank must build its Reducer over the same parameters",
          where(), n);
  }
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = size_t(message[k + 1]);
  BucketPlan next = plan_buckets(specs_, options_.caps, order);
  if (next == plan_) return false;
  if (options_.sharded) {
    std::vector<Work> gathers;
    for (auto& b : buckets_) {
      const size_t es = element_size(b->dtype);
      gathers.push_back(comm_.allgather(b->data.data() + b->shard_offset * es, b->data.data(),
                                        b->elements, b->dtype));
    }
    try {
      for (auto& g : gathers) g.wait();
    } catch (const Error& e) {
      for (auto& g : gathers) {
        try { g.wait(); } catch (const Error&) {}
      }
      throw Error(e.code(), fmt::format("{}: gathering the shards to rebuild the Buckets "
                                        "failed: {}", where(), bare_message(e)));
    }
  }

  // Carry this step's results over, so a view fetched after the rebuild
  // already holds them (the optimizer has not run yet).
  std::vector<std::unique_ptr<Bucket>> old = std::move(buckets_);
  const BucketPlan old_plan = plan_;
  allocate(next);
  for (size_t i = 0; i < n; ++i) {
    const auto& from = old_plan.location[i];
    const size_t es = element_size(specs_[i].dtype);
    const std::byte* src = old[from.bucket]->data.data() + from.offset * es;
    copy_bytes(specs_[i].device.index(), slot(i), src, specs_[i].elements * es, stream);
  }
  retired_ = std::move(old);
  ++plan_generation_;
  log().info("{}: rebuilt {} Buckets into {} from rank 0's gradient ready order", where(),
             old_plan.buckets.size(), plan_.buckets.size());
  return true;
}

}  // namespace gradwire

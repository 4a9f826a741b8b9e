// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "consistency.h"

#include "gradwire/device_stream.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "gradwire/error.h"

namespace gradwire::torch::detail {

std::vector<TensorEntry> module_entries(const ::torch::nn::Module& module, size_t& n_params) {
  std::vector<TensorEntry> entries;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    entries.push_back({item.key(), item.value(), false});
  }
  n_params = entries.size();
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    entries.push_back({item.key(), item.value(), true});
  }
  return entries;
}

namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<int64_t> allgather_i64(Communicator& comm, const std::vector<int64_t>& mine) {
  std::vector<int64_t> all(mine.size() * size_t(comm.size()));
  comm.allgather(mine.data(), all.data(), all.size(), DataType::Int64).wait();
  return all;
}

// Room for one entry's description per rank in the slow path; longer
// descriptions are cut (the fingerprint still covers all of it).
constexpr size_t kDescriptionBytes = 240;

}  // namespace

void check_supported_device(Communicator& comm, const TensorEntry& e) {
  const c10::Device d = e.tensor.device();
  if (supported_device(d)) return;
  throw Error(ErrorCode::InvalidArgument,
              "rank " + std::to_string(comm.rank()) + ": DistributedDataParallel: " +
                  describe(e) + " is on " + d.str() + "; host (cpu) and CUDA tensors are "
                  "supported");
}

std::string describe(const TensorEntry& e) {
  std::ostringstream o;
  o << (e.buffer ? "buffer " : "parameter ") << e.name << " [";
  for (int64_t d = 0; d < e.tensor.dim(); ++d) o << (d ? ", " : "") << e.tensor.size(d);
  // The device type, not its index: rank r's model sits on its own GPU.
  o << "] " << c10::toString(e.tensor.scalar_type()) << ' '
    << c10::DeviceTypeName(e.tensor.device().type(), /*lower_case=*/true);
  if (!e.buffer && !e.tensor.requires_grad()) o << " (requires_grad=false)";
  return o.str();
}

DataType gradient_dtype(const ::torch::Tensor& t, const std::string& name) {
  // Real floating types only: a complex gradient is not averaged here.
  const auto d = t.is_complex() ? std::nullopt : element_type(t.scalar_type());
  if (d && is_floating(*d)) return *d;
  throw Error(ErrorCode::InvalidArgument,
              "DistributedDataParallel: parameter " + name + " has dtype " +
                  std::string(c10::toString(t.scalar_type())) +
                  "; gradients of float32, float64, float16 and bfloat16 can be averaged "
                  "(set requires_grad=false on it to leave it out of the reduction)");
}

// Note [parameter check]: one allgather of (count, hash of every
// description) in the common case. Only when they differ do we pay two
// more allgathers to find the first differing entry and fetch every rank's
// description of it, so that all ranks throw the same message, which names
// the parameter and the ranks that disagree with rank 0.
void check_same_entries(Communicator& comm, const std::vector<TensorEntry>& entries,
                        const std::string& who) {
  const int world = comm.size();
  std::vector<std::string> desc;
  std::vector<int64_t> hashes;
  uint64_t all_hash = 1469598103934665603ull;
  for (const auto& e : entries) {
    desc.push_back(describe(e));
    hashes.push_back(int64_t(fnv1a(desc.back())));
    all_hash = fnv1a(desc.back() + '\n', all_hash);
  }
  const auto summary = allgather_i64(comm, {int64_t(entries.size()), int64_t(all_hash)});
  bool same = true;
  int64_t max_count = 0;
  for (int r = 0; r < world; ++r) {
    same &= summary[2 * r] == summary[0] && summary[2 * r + 1] == summary[1];
    max_count = std::max(max_count, summary[2 * r]);
  }
  if (same) return;

  // Every rank computes the same k from the same gathered table.
  std::vector<int64_t> padded(size_t(max_count), 0);  // 0: no such entry
  std::copy(hashes.begin(), hashes.end(), padded.begin());
  const auto table = allgather_i64(comm, padded);
  size_t k = 0;
  for (; k < size_t(max_count); ++k) {
    bool differ = false;
    for (int r = 1; r < world; ++r) differ |= table[size_t(r) * max_count + k] != table[k];
    if (differ) break;
  }
  std::string mine = k < desc.size() ? desc[k] : "no entry #" + std::to_string(k) +
                                                     " (only " + std::to_string(desc.size()) + ")";
  std::vector<uint8_t> text(kDescriptionBytes, 0), texts(kDescriptionBytes * size_t(world));
  std::memcpy(text.data(), mine.data(), std::min(mine.size(), kDescriptionBytes - 1));
  comm.allgather(text.data(), texts.data(), texts.size(), DataType::UInt8).wait();
  auto text_of = [&](int r) {
    return std::string(reinterpret_cast<const char*>(texts.data() + size_t(r) * kDescriptionBytes));
  };

  std::ostringstream o;
  o << "rank " << comm.rank() << ": " << who << ": the ranks hold different "
    << "parameters or buffers; the first difference is at #" << k << " (in registration "
    << "order, parameters then buffers): rank 0 has " << text_of(0);
  int shown = 0, others = 0;
  for (int r = 1; r < world; ++r) {
    if (table[size_t(r) * max_count + k] == table[k]) continue;
    if (shown < 8) {
      o << "; rank " << r << " has " << text_of(r);
      ++shown;
    } else {
      ++others;
    }
  }
  if (others) o << "; and " << others << " more ranks differ";
  o << ". Every rank must construct the same model (same shapes, dtypes and order)";
  throw Error(ErrorCode::Mismatch, o.str());
}

void broadcast_tensors(Communicator& comm, const std::vector<TensorEntry>& entries, int root) {
  at::NoGradGuard no_grad;  // copy_ into parameters
  struct Pending {
    ::torch::Tensor target, staging;
    Work work;
  };
  std::vector<Pending> pending;
  pending.reserve(entries.size());
  // All broadcasts are submitted first, then waited for: they pipeline on
  // the engine thread instead of paying a round trip each.
  for (const auto& e : entries) {
    const ::torch::Tensor& t = e.tensor;
    check_supported_device(comm, e);
    if (t.numel() == 0) continue;
    Pending p{t, t.is_contiguous() ? t : t.contiguous(), Work()};
    // As bytes: a broadcast copies, so any dtype (bool, int8 ...) works.
    // CUDA tensors go to NCCL after the work on PyTorch's current stream
    // (Note [producer stream]).
    const size_t bytes = size_t(p.staging.numel()) * p.staging.element_size();
    DeviceStreamScope scope(current_stream(t.device()));
    p.work = comm.broadcast(p.staging.data_ptr(), p.staging.data_ptr(), bytes, DataType::UInt8,
                            root);
    pending.push_back(std::move(p));
  }
  for (auto& p : pending) {
    p.work.wait();
    if (!p.staging.is_same(p.target)) p.target.copy_(p.staging);
  }
}

}  // namespace gradwire::torch::detail

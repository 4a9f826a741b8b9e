// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "collectives/context.h"
#include "core/engine.h"
#include "gradwire/communicator.h"
#include "transport/transport.h"

namespace gradwire {

// Everything a Communicator owns. Member order is destruction order in
// reverse: the engine (last member) stops first, then the transport closes,
// then the bootstrap (whose TCP store other ranks may still be reading).
class CommunicatorImpl {
 public:
  CommunicatorImpl(Options options, int rank, int size, std::string name,
                   std::unique_ptr<bootstrap::Bootstrap> bootstrap,
                   std::unique_ptr<transport::Transport> transport, std::string iface);
  ~CommunicatorImpl();

  // Enqueues `fn` as collective `op` and returns its Work. `detail` goes
  // into the description ("1048576 x float32 sum").
  Work submit(std::string_view op, const std::string& detail,
              std::function<void(collectives::Context&)> fn);
  void abort(const std::string& reason);
  // Finishes queued work; false if the engine is stuck (then this object
  // must be leaked, Note [a stuck engine is leaked]).
  bool shutdown() { return engine_->shutdown(); }
  // Every rank's blob (synchronous; runs two allgathers on this communicator).
  std::vector<std::string> allgather_blobs(const std::string& mine);

  const Options options;
  const int rank, size;
  const std::string name;  // "world" or "group [0, 2]"
  const std::string iface;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap;
  std::unique_ptr<transport::Transport> transport;
  int children = 0;  // sub-communicators created, for their names

 private:
  void fail_communicator(const std::string& reason);

  std::array<std::vector<std::byte>, 2> scratch_;  // engine thread only
  std::mutex submit_mu_;
  uint32_t next_seq_ = 0;
  std::mutex state_mu_;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace gradwire

// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [foreign signal handlers]
// Loading libfabric loads every provider library it was built against.
// Debian's build links PSM's libinfinipath, whose constructor installs a
// handler for SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV and SIGTERM that
// prints a backtrace and calls exit(1) from inside the handler. A process
// SIGTERMed while exiting then ran the exit handlers a second time, on top
// of the locks the first run held (torch's dispatcher mutex, the malloc
// arena, the exit-handler lock), and hung for ever; every SIGTERMed rank
// exited with status 1 instead of 143, and Python's Ctrl-C (SIGINT)
// became exit(1). gradwire opens no PSM endpoint, so no provider of ours
// has any business with the process's signals: libfabric is loaded lazily
// (Note [loading libfabric] in transport/ofi/library.h) and every call
// into it that may load or initialise a provider, and MPI_Init (Open MPI
// loads its own libfabric and PSM components), runs under a
// SignalDispositionGuard that puts back every disposition changed in
// between, except handlers that belong to a library the caller accepts
// (Open MPI's own backtrace handlers). Restoring is process-wide: a
// handler another thread installs during that window (start-up only) is
// lost as well.
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

namespace gradwire {

class SignalDispositionGuard {
 public:
  // `what` names the call for the debug log; `keep(path)` is asked for a
  // changed handler that lies in the shared object at `path` and keeps it
  // when it returns true.
  explicit SignalDispositionGuard(std::string what,
                                  std::function<bool(const std::string&)> keep = {});
  ~SignalDispositionGuard();
  SignalDispositionGuard(const SignalDispositionGuard&) = delete;
  SignalDispositionGuard& operator=(const SignalDispositionGuard&) = delete;

 private:
  std::string what_;
  std::function<bool(const std::string&)> keep_;
  std::vector<struct sigaction> saved_;
};

}  // namespace gradwire

// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The mpirun bootstrap (Open MPI).
//
// Note [mpi bootstrap deadlines]
// A blocking MPI collective cannot be interrupted, so allgather posts the
// non-blocking MPI_Iallgather / MPI_Iallgatherv and drives them with
// MPI_Test until the deadline. A rank that died is mpirun's business: its
// failure detection (the ORTE/PRRTE daemons) aborts the whole job, so the
// survivors do not hang. What the deadline adds is the case mpirun cannot
// see: a rank alive but stuck elsewhere, which becomes a Timeout here. An
// MPI request cannot be cancelled once a collective is posted, so on a
// Timeout its buffers are deliberately leaked (MPI may still write into
// them); the job is expected to end after a bootstrap failure anyway.
// The C API only: the deprecated C++ bindings would need libmpi_cxx, which
// the library does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/env.h"
#include "base/raise.h"
#include "base/logging.h"
#include "base/signals.h"

namespace gradwire::bootstrap {

namespace {

using std::chrono::milliseconds;

std::string mpi_error_text(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(buf, size_t(len));
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    raise(ErrorCode::Transport, "mpirun bootstrap: {} failed: {}", what, mpi_error_text(rc));
  }
}

bool mpi_finalized() {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

// Note [MPI_Finalize at exit]: Open MPI reports an error if a process that
// called MPI_Init exits without MPI_Finalize, so gradwire, having
// initialized MPI, finalizes it at exit (registered only then). But Open
// MPI's MPI_Finalize waits for every rank: a rank exiting with an error
// would block there, waiting for ranks that wait for it in a collective
// (until their deadline: 30 min under torch's default). So only a clean
// exit (status 0) finalizes; a failing rank exits at once, and mpirun,
// seeing it leave without MPI_Finalize, ends the job.
void finalize_on_exit(int status, void*) {
  if (status == 0 && !mpi_finalized()) MPI_Finalize();
}

void ensure_initialized() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  if (mpi_finalized()) {
    raise(ErrorCode::InvalidArgument,
          "mpirun bootstrap: MPI was already finalized in this process; create the "
          "Communicator before calling MPI_Finalize");
  }
  int provided = 0;
  // We ask for MULTIPLE but only ever call MPI from the thread calling
  // allgather, so any level works as long as the caller does not overlap
  // bootstrap calls with its own MPI calls on other threads.
  {
    // Open MPI loads its libfabric and PSM components here, and with them
    // PSM's signal handlers (Note [foreign signal handlers]); Open MPI's own
    // backtrace handlers (libopen-pal, libmpi) stay.
    SignalDispositionGuard guard("MPI_Init_thread", [](const std::string& owner) {
      return owner.find("libopen-pal") != std::string::npos ||
             owner.find("libopen-rte") != std::string::npos ||
             owner.find("libmpi") != std::string::npos;
    });
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
              "MPI_Init_thread");
  }
  ::on_exit(finalize_on_exit, nullptr);
  log().debug("mpirun bootstrap: MPI initialized by gradwire (thread level {})", provided);
}

// Buffers of one allgather; heap-allocated so that they can outlive a
// timed-out request (Note [mpi bootstrap deadlines]).
struct Exchange {
  std::vector<int> lengths;
  std::vector<int> displs;
  int mine_length = 0;
  std::string mine;
  std::string all;
  MPI_Request request = MPI_REQUEST_NULL;
};

class MpiBootstrap final : public Bootstrap {
 public:
  MpiBootstrap() {
    ensure_initialized();
    // Our own communicator: the application's traffic and error handler on
    // MPI_COMM_WORLD stay untouched, and errors come back as codes.
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup(MPI_COMM_WORLD)");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    cross_check("OMPI_COMM_WORLD_RANK", rank_, "MPI_Comm_rank");
    cross_check("OMPI_COMM_WORLD_SIZE", size_, "MPI_Comm_size");
    if (auto v = env::get("OMPI_COMM_WORLD_LOCAL_RANK")) {
      auto lr = env::parse_int(*v);
      if (!lr || *lr < 0 || *lr >= size_) {
        raise(ErrorCode::InvalidArgument,
              "OMPI_COMM_WORLD_LOCAL_RANK='{}' is not a valid local rank (expected an integer "
              "0 <= OMPI_COMM_WORLD_LOCAL_RANK < {})",
              *v, size_);
      }
      local_rank_ = *lr;
    }
  }

  ~MpiBootstrap() override {
    if (comm_ != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string describe() const override { return "mpirun"; }

  // MPI_Allgather of the lengths, then MPI_Allgatherv of the bytes, since
  // every rank's blob may have a different length (non-blocking variants;
  // Note [mpi bootstrap deadlines]).
  std::vector<std::string> allgather(const std::string& mine, Deadline deadline) override {
    const uint64_t round = round_++;
    if (mine.size() > size_t(INT_MAX)) {
      raise(ErrorCode::InvalidArgument,
            "mpirun bootstrap allgather round {}: blob of {} bytes exceeds MPI's int count",
            round, mine.size());
    }
    auto ex = std::make_unique<Exchange>();
    ex->mine = mine;
    ex->lengths.assign(size_, 0);
    int my_len = int(mine.size());
    // Send buffers must stay valid as long as the request, so they live in
    // Exchange too.
    ex->mine_length = my_len;
    check_mpi(MPI_Iallgather(&ex->mine_length, 1, MPI_INT, ex->lengths.data(), 1, MPI_INT,
                             comm_, &ex->request),
              "MPI_Iallgather");
    wait(ex, deadline, round, "lengths");

    long long total = 0;
    ex->displs.assign(size_, 0);
    for (int r = 0; r < size_; ++r) {
      ex->displs[r] = int(std::min<long long>(total, INT_MAX));
      total += ex->lengths[r];
    }
    if (total > INT_MAX) {
      raise(ErrorCode::InvalidArgument,
            "mpirun bootstrap allgather round {}: {} bytes in all exceed MPI's int displacement",
            round, total);
    }
    ex->all.resize(size_t(total));
    check_mpi(MPI_Iallgatherv(ex->mine.data(), my_len, MPI_CHAR, ex->all.data(),
                              ex->lengths.data(), ex->displs.data(), MPI_CHAR, comm_,
                              &ex->request),
              "MPI_Iallgatherv");
    wait(ex, deadline, round, "blobs");

    std::vector<std::string> out(size_);
    for (int r = 0; r < size_; ++r) out[r] = ex->all.substr(ex->displs[r], ex->lengths[r]);
    return out;
  }

 private:
  void cross_check(const char* var, int mpi_value, const char* mpi_call) const {
    auto v = env::get(var);
    if (!v) return;
    auto parsed = env::parse_int(*v);
    if (!parsed || *parsed != mpi_value) {
      raise(ErrorCode::Mismatch,
            "{}='{}' but {} says {}; is this process started by a different mpirun than the "
            "MPI library it loaded (mixed Open MPI installations)?",
            var, *v, mpi_call, mpi_value);
    }
  }

  void wait(std::unique_ptr<Exchange>& ex, Deadline deadline, uint64_t round,
            const char* phase) {
    auto t0 = Clock::now();
    auto pause = std::chrono::microseconds(0);
    for (;;) {
      int done = 0;
      check_mpi(MPI_Test(&ex->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (deadline.expired()) break;
      // MPI_Test drives progress; back off to 1 ms so a long wait does not
      // burn a core that the training process may need.
      if (pause.count() == 0) {
        std::this_thread::yield();
        pause = std::chrono::microseconds(10);
      } else {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
      }
    }
    static std::mutex leak_mu;
    static auto* leaked = new std::vector<std::unique_ptr<Exchange>>;
    {
      std::lock_guard<std::mutex> lock(leak_mu);
      leaked->push_back(std::move(ex));
    }
    raise(ErrorCode::Timeout,
          "mpirun bootstrap allgather round {} ({}): not complete after {} ms (rank {} of {}); "
          "some rank has not reached this allgather. A dead rank makes mpirun abort the job, "
          "so the missing rank is alive but stuck elsewhere, or ranks call allgather a "
          "different number of times",
          round, phase,
          std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count(), rank_, size_);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = -1;
  uint64_t round_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> make_mpi_bootstrap() { return std::make_unique<MpiBootstrap>(); }

}  // namespace gradwire::bootstrap


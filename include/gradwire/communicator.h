// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include "gradwire/export.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gradwire/device_stream.h"
#include "gradwire/options.h"
#include "gradwire/rendezvous.h"
#include "gradwire/shared_buffer.h"
#include "gradwire/straggler.h"
#include "gradwire/types.h"
#include "gradwire/work.h"

namespace gradwire {

class CommunicatorImpl;

// What the body of a composite operation (Communicator::compose) may do: run
// collectives of its communicator at once, on the thread that runs the
// operation, between steps of its own. Each call returns when the
// collective is done here; a failure throws (and fails the operation and
// the communicator, as any failed collective). Host memory only. Valid only
// inside the body it was passed to.
class CompositeSteps {
 public:
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce(const void* send, void* recv, size_t count, DataType dtype,
                         ReduceOp op) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DataType dtype,
                              ReduceOp op) = 0;
  virtual void allgather(const void* send, void* recv, size_t count, DataType dtype) = 0;
  virtual void broadcast(const void* send, void* recv, size_t count, DataType dtype,
                         int root) = 0;
  // As Communicator::alltoall (the sharded engine's quantized gradient
  // exchange, Note [compressed gradient reduce-scatter] in
  // src/sharded/compressed.cpp).
  virtual void alltoall(const void* send, void* recv, size_t count_per_rank, DataType dtype) = 0;

 protected:
  ~CompositeSteps() = default;
};

// GPU work around one collective on CUDA buffers (Communicator::allreduce
// with steps): `before` is called to enqueue work on the stream the
// collective runs on right before it, `after` right after it, in the order
// of the communicator's device collectives. Either may be empty.
struct DeviceSteps {
  std::function<void(Stream)> before, after;
};

// A Communicator owns a set of ranks and runs collectives among them.
//
// Collectives are asynchronous: each call validates its arguments on the
// calling thread (throwing InvalidArgument at once), enqueues the collective
// and returns a Work. An engine thread per communicator runs them strictly in
// submission order, so every rank must submit the same collectives in the
// same order (as with MPI and NCCL). Buffers must stay valid and untouched
// until the Work completes. Calls are thread-safe: the submission order is
// the order in which calls return.
//
// "In place" means what it means in NCCL: for allreduce and broadcast
// send == recv; for reduce_scatter recv points at this rank's shard inside
// send; for allgather send points at this rank's shard inside recv; for
// alltoall send == recv.
class GRADWIRE_API Communicator {
 public:
  // Joins the job described by the environment: Open MPI's mpirun
  // (OMPI_COMM_WORLD_*), the torchrun convention (RANK, WORLD_SIZE,
  // MASTER_ADDR, MASTER_PORT) or a file store (GRADWIRE_STORE_DIR with RANK
  // and WORLD_SIZE). Collective over all ranks; fails with a clear error
  // naming the variable or the rank it waited for.
  static std::unique_ptr<Communicator> create(const Options& options = {});
  // Joins the job `rendezvous` describes (gradwire/rendezvous.h): a TCP
  // store at an address, a file store, an in-process store shared by ranks
  // that are threads, mpirun, or a world of one. The same as above with
  // Rendezvous::from_environment(); a field that cannot work is an
  // InvalidArgument naming it.
  static std::unique_ptr<Communicator> create(const Options& options,
                                              const Rendezvous& rendezvous);

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  // The libfabric provider in use, e.g. "shm" or "tcp;ofi_rxm".
  std::string provider() const;
  const Options& options() const;
  // Hosts the ranks run on (Options::transport.host_id), and whether large allreduces
  // run hierarchically across them (Options::collectives.hierarchical).
  int host_count() const;
  bool hierarchical() const;

  // A sub-communicator of the listed ranks (ranks of this communicator, in
  // the new rank order), like torch.distributed.new_group. Collective over
  // every rank of this communicator, each passing the same list; returns
  // nullptr on ranks that are not members. Different lists: Mismatch.
  std::unique_ptr<Communicator> split(const std::vector<int>& ranks);

  // `bytes` of host memory that the other ranks of this host map too (see
  // SharedBuffer): allreduce, reduce_scatter and allgather on such buffers
  // run directly between the ranks' memory when every rank shares one host.
  // Collective: every rank calls it, in the same order relative to other
  // collectives (sizes may differ). Like NCCL's ncclMemAlloc or an MPI
  // shared window; elsewhere (ranks on several hosts, no /dev/shm) it
  // returns private memory and says why in the log.
  SharedBuffer allocate_shared(size_t bytes);

  // recv[i] = op over ranks of send[i], i < count.
  Work allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  // send holds `count` elements; recv receives shard_count(count, size, rank)
  // elements: the reduction of elements [shard_offset, +shard_count).
  Work reduce_scatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  // send holds shard_count(count, size, rank) elements; recv receives all
  // `count` elements, rank r's shard at shard_offset(count, size, r).
  Work allgather(const void* send, void* recv, size_t count, DataType dtype);
  // recv (on every rank) = send of `root`; send is read only on root.
  Work broadcast(const void* send, void* recv, size_t count, DataType dtype, int root);
  // send and recv hold size() blocks of `count_per_rank` elements; block j
  // of send goes to rank j, block i of recv comes from rank i.
  Work alltoall(const void* send, void* recv, size_t count_per_rank, DataType dtype);
  Work barrier();

  // Rooted collectives (like MPI_Reduce, MPI_Gather, MPI_Scatter):
  // recv (on root only) = op over ranks of send; count elements. Off the
  // root recv is not used (may be null). In place on the root: send == recv.
  Work reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root);
  // Every rank sends `count_per_rank` elements; root's recv receives size()
  // blocks, rank i's at i * count_per_rank. In place on the root:
  // send == recv + rank * count_per_rank. Off the root recv may be null.
  Work gather(const void* send, void* recv, size_t count_per_rank, DataType dtype, int root);
  // Root's send holds size() blocks of `count_per_rank` elements; rank i
  // receives block i. In place on the root: recv == send + rank *
  // count_per_rank. Off the root send may be null.
  Work scatter(const void* send, void* recv, size_t count_per_rank, DataType dtype, int root);

  // Point-to-point messages (like MPI_Isend/MPI_Irecv, torch's isend/irecv).
  // Not collective: only the two ranks take part. A receive takes the first
  // message from `peer` with `tag` that it has not taken yet; messages from
  // one peer with one tag arrive in the order they were sent. The sizes must
  // match: a message of another size fails with Mismatch on the receiver.
  // Queued in order with this rank's collectives, but they complete
  // asynchronously: a send and a receive posted back to back never wait for
  // each other (ring exchanges cannot deadlock). An operation still
  // outstanding at the deadline (Options::timeout) fails the communicator
  // with Timeout naming the peer and tag; a failed communicator fails every
  // outstanding one; destroying the communicator cancels them.
  // Host memory only (for now).
  Work send(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag = 0);
  Work recv(void* buf, size_t count, DataType dtype, int peer, uint32_t tag = 0);
  // A receive from whichever rank's message with `tag` is matched first
  // (MPI_ANY_SOURCE; torch's recv with src=None). `*source`, if given, is set
  // to the sender before the Work completes.
  Work recv_any(void* buf, size_t count, DataType dtype, uint32_t tag = 0,
                int* source = nullptr);

  // Note [composite operations]: `body` runs as one operation in this
  // communicator's order, on its engine thread: steps of its own (element
  // work on the caller's buffers) and collectives through `steps`, with
  // nothing of this rank's in between. It is what a compressor needs for
  // "multiply, allreduce, orthonormalise, multiply, allreduce" without a
  // round trip to the caller between the collectives. Every rank must
  // compose the same collectives in the same order. `name` and `detail`
  // describe it in errors, logs and the flight recorder ("rank 0: allreduce
  // #12 (bucket 3: P)"). The body must not wait for other Works of this
  // communicator (they would queue behind it).
  Work compose(std::string_view name, std::string detail,
               std::function<void(CompositeSteps& steps)> body);
  // An allreduce on CUDA buffers with GPU work of the caller's around it,
  // on the stream the collective runs on (see DeviceSteps), so that work
  // that must follow the collective on the GPU is ordered after it without
  // a host synchronisation. InvalidArgument for host buffers.
  Work allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                 DeviceSteps steps);

  // Fails every pending and future collective with Aborted and cancels every
  // outstanding transfer, so no user buffer is written after it returns.
  void abort(const std::string& reason);
  // True once this communicator has failed (a collective's error, or
  // another rank's reported failure reached it) or abort() was called:
  // every later call fails with Aborted.
  bool aborted() const;

  // Stragglers (README "Reading a straggler report"): `callback` is called
  // on every rank when a rank of this communicator becomes named as one
  // (it kept the others waiting Options::diagnostics.straggler_threshold of
  // the last straggler_window) and again when it no longer is; see
  // StragglerReport for what it gets and where it runs. Replaces an earlier
  // callback; an empty one removes it. Only communicators with a store
  // detect stragglers (a world launched by torchrun, Slurm, a file or an
  // in-process store; not mpirun, not split()), and only with the flight
  // recorder on.
  void on_straggler(StragglerCallback callback);
  // The ranks named now (empty: none, or no detection here).
  std::vector<StragglerReport> stragglers() const;

 private:
  explicit Communicator(std::unique_ptr<CommunicatorImpl> impl);
  std::unique_ptr<CommunicatorImpl> impl_;
};

}  // namespace gradwire

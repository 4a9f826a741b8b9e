// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [composite operations]: some operations are several collectives with
// work of their own between them that nothing of this rank's may
// interleave with: PowerSGD's "allreduce P, orthonormalise P, multiply,
// allreduce Q, multiply" (src/compress/powersgd.cpp). Queued as separate
// collectives, a second thread's collective (another bucket's hook) could
// land between them, and every step would hand the engine thread back to
// the caller and back again. Communicator::compose queues one operation
// whose body runs on the engine thread and runs its collectives there at
// once (CompositeSteps over the operation's Context); on CUDA buffers
// Communicator::allreduce with DeviceSteps hands the GPU work around the
// collective to the device backend, which runs it on the collective's own
// stream (Note [device steps] in device/backend.h). Both are public API:
// the compression layer uses them as any user's compressor would, with no
// access to the runtime's insides.
#include "runtime/communicator_impl.h"

#include "base/raise.h"
#include "collectives/collectives.h"
#include "gradwire/device_stream.h"

namespace gradwire {

namespace {

// CompositeSteps over the running operation's Context: each collective runs
// at once on this thread, as part of the operation.
class ContextSteps final : public CompositeSteps {
 public:
  explicit ContextSteps(collectives::Context& ctx) : ctx_(ctx) {}
  int rank() const override { return ctx_.rank(); }
  int size() const override { return ctx_.size(); }
  void allreduce(const void* send, void* recv, size_t count, DataType dtype,
                 ReduceOp op) override {
    run(CollectiveCall::allreduce(send, recv, count, dtype, op));
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DataType dtype,
                      ReduceOp op) override {
    run(CollectiveCall::reduce_scatter(send, recv, count, dtype, op));
  }
  void allgather(const void* send, void* recv, size_t count, DataType dtype) override {
    run(CollectiveCall::allgather(send, recv, count, dtype));
  }
  void broadcast(const void* send, void* recv, size_t count, DataType dtype, int root) override {
    run(CollectiveCall::broadcast(send, recv, count, dtype, root));
  }
  void alltoall(const void* send, void* recv, size_t count_per_rank, DataType dtype) override {
    run(CollectiveCall::alltoall(send, recv, count_per_rank, dtype));
  }

 private:
  void run(const CollectiveCall& call) {
    // Nothing to move: every rank sees the same count (the whole buffer).
    if (call.count == 0) return;
    // The same checks as a call of the public API.
    validate(call, ctx_.rank(), ctx_.size());
    collectives::run(ctx_, call);
  }
  collectives::Context& ctx_;
};

}  // namespace

Work CommunicatorImpl::compose(std::string_view name, std::string detail,
                               std::function<void(CompositeSteps&)> body) {
  if (!body) {
    raise(ErrorCode::InvalidArgument, "rank {}: compose({}) got an empty body", rank, name);
  }
  if (name.empty()) name = "composite";
  // CollectiveOp::Other: no fingerprint of its own (its ranks compose the
  // same collectives; with GRADWIRE_DEBUG=DETAIL the public collectives
  // around it are compared).
  return submit({}, [body = std::move(body)](collectives::Context& ctx) {
    ContextSteps steps(ctx);
    body(steps);
  }, {name, std::move(detail)});
}

Work Communicator::compose(std::string_view name, std::string detail,
                           std::function<void(CompositeSteps&)> body) {
  return impl_->compose(name, std::move(detail), std::move(body));
}

Work Communicator::allreduce(const void* send, void* recv, size_t count, DataType dtype,
                             ReduceOp op, DeviceSteps steps) {
  device::Steps gpu;
  if (steps.before) {
    gpu.before = [f = std::move(steps.before)](void* stream) { f(Stream(stream)); };
  }
  if (steps.after) {
    gpu.after = [f = std::move(steps.after)](void* stream) { f(Stream(stream)); };
  }
  return impl_->start_device(CollectiveCall::allreduce(send, recv, count, dtype, op),
                             std::move(gpu));
}

}  // namespace gradwire

// Uses only the installed public headers: a one-rank allreduce.
#include <gradwire/gradwire.h>

#include <cstdio>

int main() {
  auto comm = gradwire::Communicator::create();
  float x[3] = {1, 2, 3}, y[3] = {};
  comm->allreduce(x, y, 3, gradwire::DataType::Float32, gradwire::ReduceOp::Sum).wait();
  std::printf("gradwire %s: rank %d of %d via %s: %g %g %g\n", gradwire::version(), comm->rank(),
              comm->size(), comm->provider().c_str(), y[0], y[1], y[2]);
  return (y[0] == 1 && y[1] == 2 && y[2] == 3) ? 0 : 1;
}

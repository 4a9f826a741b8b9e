// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A c10d::ProcessGroup on gradwire from C++, without Python
// (gradwire/torch/process_group.h; launched by gwlaunch at 2 and 3 ranks,
// see CMakeLists.txt): the collectives torch's DistributedDataParallel
// runs (the parameter check's allgather, the parameter broadcast, bucket
// allreduces, barrier), then libtorch's own c10d::Reducer, DDP's engine,
// driving a few training steps over the group, and the errors a user
// meets. Results are compared bit for bit with the same arithmetic done
// locally (Note [rank-order sums]).
//
// Note [rank-order sums]: on one host, gradwire's allreduce of ordinary
// buffers folds the ranks' inputs in rank order, every element on every
// rank alike (Note [small collectives] in src/collectives/small.cpp, Note
// [the copy path] in src/collectives/copy_path.cpp), 16-bit floats in
// float32 with one rounding per step. So each rank can compute the exact
// result itself: every rank's input is known to all (seeded by rank), and
// ((x0 + x1) + x2) in the tensors' dtype is what the group must return.
// This needs the one-host paths (GRADWIRE_SHM_COLLECTIVES on, the
// default): through the transport the ring folds in another order.
// Gloo's c10d::ProcessGroupGloo, the natural reference, cannot be built
// from C++ against the PyPI wheel: its header includes gloo's, which the
// wheel does not ship; tests/python/collectives_worker.py compares
// against gloo from Python.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"
#include "gradwire/torch/process_group.h"

namespace {

int g_rank = 0, g_size = 1;
c10::intrusive_ptr<c10d::Store> g_store;     // a FileStore every rank opens
c10::intrusive_ptr<c10d::ProcessGroup> g_pg;  // the group the tests share

// A group of its own (its own Communicator) under `prefix` of the store.
c10::intrusive_ptr<c10d::ProcessGroup> new_group(const std::string& prefix) {
  return gradwire::torch::make_process_group(
      c10::make_intrusive<c10d::PrefixStore>(prefix, g_store), g_rank, g_size);
}

// Rank r's input: random normal values, seeded by (seed, r), so that every
// rank can make every rank's input.
at::Tensor input_of(int r, int64_t n, at::ScalarType dtype, int seed) {
  at::Generator gen = at::detail::createCPUGenerator(uint64_t(seed) * 1000 + uint64_t(r));
  return at::randn({n}, gen, at::TensorOptions().dtype(at::kFloat)).to(dtype);
}

// Note [rank-order sums]: ((x0 + x1) + ...) in the inputs' dtype.
at::Tensor rank_order_sum(const std::vector<at::Tensor>& xs) {
  at::Tensor acc = xs[0].clone();
  for (size_t r = 1; r < xs.size(); ++r) acc = acc + xs[r];
  return acc;
}

::testing::AssertionResult bitwise_equal(const at::Tensor& got, const at::Tensor& want) {
  if (got.scalar_type() == want.scalar_type() && got.sizes() == want.sizes() &&
      at::equal(got, want)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "rank " << g_rank << ": got " << got.scalar_type() << " " << got.sizes()
         << ", want " << want.scalar_type() << " " << want.sizes() << "; largest difference "
         << (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
}

TEST(ProcessGroup, RunsOnGradwire) {
  EXPECT_EQ(g_pg->getRank(), g_rank);
  EXPECT_EQ(g_pg->getSize(), g_size);
  auto backend = g_pg->getBackend(c10::DeviceType::CPU);
  EXPECT_EQ(backend->getBackendName(), "gradwire");
  auto* gw = dynamic_cast<gradwire::torch::Backend*>(backend.get());
  ASSERT_NE(gw, nullptr);
  EXPECT_EQ(gw->communicator().size(), g_size);
  g_pg->barrier()->wait();
}

// DDP's construction: verify_params_across_processes (an allgather of
// every parameter's shape into a list of outputs), then _sync_module_states
// (broadcast_coalesced from rank 0).
TEST(DDPCollectives, ParameterCheckAndBroadcast) {
  std::vector<at::Tensor> params;
  for (int i = 0; i < 4; ++i) {
    params.push_back(input_of(g_rank, 10 + 7 * i, at::kFloat, 50 + i).reshape({-1, 1}));
  }
  params.push_back(input_of(g_rank, 12, at::kBFloat16, 60).reshape({3, 4}));
  c10d::verify_params_across_processes(g_pg, params, std::nullopt);
  c10d::broadcast_coalesced(g_pg, params, 250 * 1024 * 1024, 0);
  for (size_t i = 0; i < params.size(); ++i) {
    const auto want = input_of(0, params[i].numel(), params[i].scalar_type(),
                               i < 4 ? 50 + int(i) : 60);
    EXPECT_TRUE(bitwise_equal(params[i].reshape({-1}), want)) << "parameter " << i;
  }
}

// DDP's bucket allreduces: SUM (the Reducer divides before, Note [rank-order
// sums]) and AVG, float32 and bfloat16, from a few elements to more than
// the small collectives' 64 KiB and the copy path's 1 MiB round.
TEST(DDPCollectives, BucketAllreduce) {
  int seed = 0;
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t n : {int64_t(7), int64_t(1000), int64_t(70001), int64_t(600000)}) {
      for (auto op : {c10d::ReduceOp::SUM, c10d::ReduceOp::AVG}) {
        ++seed;
        std::vector<at::Tensor> all;
        for (int r = 0; r < g_size; ++r) all.push_back(input_of(r, n, dtype, seed));
        at::Tensor want = rank_order_sum(all);
        // AVG: the sum divided once, in float32 for 16-bit floats.
        if (op == c10d::ReduceOp::AVG) want = (want.to(at::kFloat) / float(g_size)).to(dtype);
        std::vector<at::Tensor> t{all[size_t(g_rank)].clone()};
        c10d::AllreduceOptions o;
        o.reduceOp = op;
        g_pg->allreduce(t, o)->wait();
        EXPECT_TRUE(bitwise_equal(t[0], want))
            << dtype << " n=" << n << (op == c10d::ReduceOp::SUM ? " SUM" : " AVG");
      }
    }
  }
}

// The list forms, which the backend stages through one flat tensor (Note
// [list staging] in src/torch/c10d_helpers.h): small integers, exact in
// any order.
TEST(DDPCollectives, ListForms) {
  const int64_t n = 5;
  auto value = [&](int r, int k) { return at::full({n}, float(10 * r + k), at::kFloat); };
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int r = 0; r < g_size; ++r) outs[0].push_back(at::zeros({n}));
  std::vector<at::Tensor> in{value(g_rank, 0)};
  g_pg->allgather(outs, in)->wait();
  for (int r = 0; r < g_size; ++r) EXPECT_TRUE(bitwise_equal(outs[0][size_t(r)], value(r, 0)));

  std::vector<std::vector<at::Tensor>> ins(1);
  for (int k = 0; k < g_size; ++k) ins[0].push_back(value(g_rank, k));
  std::vector<at::Tensor> out{at::zeros({n})};
  g_pg->reduce_scatter(out, ins)->wait();
  at::Tensor want = at::zeros({n});
  for (int r = 0; r < g_size; ++r) want += value(r, g_rank);
  EXPECT_TRUE(bitwise_equal(out[0], want));

  const int root = g_size - 1;
  std::vector<std::vector<at::Tensor>> gathered(g_rank == root ? 1 : 0);
  if (g_rank == root) {
    for (int r = 0; r < g_size; ++r) gathered[0].push_back(at::zeros({n}));
  }
  c10d::GatherOptions go;
  go.rootRank = root;
  g_pg->gather(gathered, in, go)->wait();
  if (g_rank == root) {
    for (int r = 0; r < g_size; ++r) {
      EXPECT_TRUE(bitwise_equal(gathered[0][size_t(r)], value(r, 0)));
    }
  }

  std::vector<std::vector<at::Tensor>> pieces(g_rank == root ? 1 : 0);
  if (g_rank == root) {
    for (int r = 0; r < g_size; ++r) pieces[0].push_back(value(root, r));
  }
  std::vector<at::Tensor> piece{at::zeros({n})};
  c10d::ScatterOptions so;
  so.rootRank = root;
  g_pg->scatter(piece, pieces, so)->wait();
  EXPECT_TRUE(bitwise_equal(piece[0], value(root, g_rank)));
}

struct NetImpl : ::torch::nn::Module {
  explicit NetImpl(at::ScalarType dtype) {
    fc1 = register_module("fc1", ::torch::nn::Linear(6, 16));
    fc2 = register_module("fc2", ::torch::nn::Linear(16, 16));
    fc3 = register_module("fc3", ::torch::nn::Linear(16, 3));
    to(dtype);
  }
  at::Tensor forward(const at::Tensor& x) {
    return fc3(::torch::tanh(fc2(::torch::tanh(fc1(x)))));
  }
  ::torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Net);

// Step `step`'s batch of rank r: B rows, the same on every rank that asks.
std::pair<at::Tensor, at::Tensor> batch_of(int r, int step, at::ScalarType dtype) {
  const int64_t b = 4;
  at::Generator gen = at::detail::createCPUGenerator(uint64_t(7000 + 100 * step + r));
  return {at::randn({b, 6}, gen).to(dtype), at::randn({b, 3}, gen).to(dtype)};
}

// libtorch's c10d::Reducer over the gradwire group, driven as
// torch.nn.parallel.DistributedDataParallel drives it (construction checks
// and broadcast, prepare_for_forward, the bucket rebuild after the first
// step, prepare_for_backward, backward), against a local model stepped
// with the rank-order average of every rank's gradient, each divided by
// the world size first as the Reducer does (Reducer::mark_variable_ready
// multiplies by 1/size while copying into the bucket).
TEST(Reducer, TrainsBitForBitWithTheRankOrderAverage) {
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    ::torch::manual_seed(100 + uint64_t(g_rank));  // different on purpose: DDP broadcasts
    Net model(dtype);
    ::torch::manual_seed(100);  // rank 0's
    Net reference(dtype);
    std::vector<at::Tensor> params = model->parameters();
    c10d::verify_params_across_processes(g_pg, params, std::nullopt);
    std::vector<at::Tensor> states;  // detached, as DDP's _sync_module_states
    for (const auto& p : params) states.push_back(p.detach());
    c10d::broadcast_coalesced(g_pg, states, 250 * 1024 * 1024, 0);

    // Small caps: several buckets per step (the parameters are ~1.6 KiB).
    const std::vector<size_t> caps{100, 300};
    auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
        params, caps, std::vector<bool>(params.size(), false));
    ASSERT_GE(buckets.size(), 3u);
    std::reverse(buckets.begin(), buckets.end());  // as DDP: the order gradients become ready
    std::vector<int64_t> cap_list(limits.rbegin(), limits.rend());
    std::unordered_map<size_t, std::string> param_names;
    c10d::Reducer reducer(params, buckets, g_pg, std::vector<bool>(params.size(), false),
                          /*bucket_bytes_cap=*/int64_t(caps[1]), /*find_unused_parameters=*/false,
                          /*gradient_as_bucket_view=*/false, param_names,
                          /*first_bucket_bytes_cap=*/int64_t(caps[0]),
                          /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                          cap_list);
    ::torch::optim::SGD opt(model->parameters(), 0.05);
    ::torch::optim::SGD opt_ref(reference->parameters(), 0.05);
    for (int step = 0; step < 4; ++step) {
      reducer.prepare_for_forward();
      reducer.rebuild_buckets();  // after the first step: a broadcast of rank 0's plan
      auto [x, y] = batch_of(g_rank, step, dtype);
      at::Tensor loss = ::torch::mse_loss(model->forward(x), y);
      reducer.prepare_for_backward({});
      loss.backward();  // the Reducer allreduces its buckets as gradients arrive
      opt.step();
      opt.zero_grad();

      // Every rank's gradient on the reference, divided, summed in rank order.
      std::vector<std::vector<at::Tensor>> per_rank;
      for (int r = 0; r < g_size; ++r) {
        opt_ref.zero_grad();
        auto [xr, yr] = batch_of(r, step, dtype);
        ::torch::mse_loss(reference->forward(xr), yr).backward();
        std::vector<at::Tensor> g;
        for (auto& p : reference->parameters()) g.push_back(p.grad().mul(1.0 / g_size));
        per_rank.push_back(std::move(g));
      }
      auto ref_params = reference->parameters();
      for (size_t i = 0; i < ref_params.size(); ++i) {
        std::vector<at::Tensor> xs;
        for (auto& g : per_rank) xs.push_back(g[i]);
        ref_params[i].mutable_grad() = rank_order_sum(xs);
      }
      opt_ref.step();
      auto got = model->parameters();
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(bitwise_equal(got[i], ref_params[i]))
            << dtype << " step " << step << " parameter " << i;
      }
    }
  }
}

// A group over a Communicator the program already has (here the world one,
// from the launcher's variables).
TEST(ProcessGroup, OverAnExistingCommunicator) {
  std::shared_ptr<gradwire::Communicator> comm = gradwire::Communicator::create();
  auto pg = gradwire::torch::make_process_group(
      c10::make_intrusive<gradwire::torch::Backend>(comm));
  std::vector<at::Tensor> t{at::full({3}, float(g_rank + 1))};
  pg->allreduce(t)->wait();
  EXPECT_TRUE(bitwise_equal(t[0], at::full({3}, float(g_size * (g_size + 1) / 2))));
  pg->barrier()->wait();
}

// FSDP2's and DTensor's collectives (Note [coalesced single-tensor
// collectives] in src/torch/c10d_ops.cpp): several pairs of tensors of
// counts not divisible by the world size (one empty), gathered into and
// reduce-scattered from tensors world size times larger, against the
// rank-order arithmetic (Note [rank-order sums]); one pair (the
// single-tensor path); mismatched lists refused on every rank.
TEST(Coalesced, AllgatherAndReduceScatterIntoTensors) {
  const std::vector<int64_t> counts{5, 1, 0, 13};
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (size_t pairs : {counts.size(), size_t(1)}) {
      std::vector<at::Tensor> ins, outs;
      for (size_t i = 0; i < pairs; ++i) {
        ins.push_back(input_of(g_rank, counts[i], dtype, int(i)));
        outs.push_back(at::full({g_size * counts[i]}, -1.0, at::TensorOptions().dtype(dtype)));
      }
      g_pg->allgather_into_tensor_coalesced(outs, ins)->wait();
      for (size_t i = 0; i < pairs; ++i) {
        std::vector<at::Tensor> all;
        for (int r = 0; r < g_size; ++r) all.push_back(input_of(r, counts[i], dtype, int(i)));
        EXPECT_TRUE(bitwise_equal(outs[i], at::cat(all))) << "allgather pair " << i;
      }

      std::vector<at::Tensor> big, shards;
      for (size_t i = 0; i < pairs; ++i) {
        big.push_back(input_of(g_rank, g_size * counts[i], dtype, 10 + int(i)));
        shards.push_back(at::full({counts[i]}, -1.0, at::TensorOptions().dtype(dtype)));
      }
      g_pg->reduce_scatter_tensor_coalesced(shards, big)->wait();
      for (size_t i = 0; i < pairs; ++i) {
        std::vector<at::Tensor> all;
        for (int r = 0; r < g_size; ++r) {
          all.push_back(input_of(r, g_size * counts[i], dtype, 10 + int(i))
                            .narrow(0, g_rank * counts[i], counts[i]));
        }
        EXPECT_TRUE(bitwise_equal(shards[i], rank_order_sum(all))) << "reduce-scatter pair " << i;
      }
    }
  }

  auto refused = [](const std::function<void()>& call, const std::string& words) {
    try {
      call();
      ADD_FAILURE() << "mismatched tensors were not refused (" << words << ")";
    } catch (const gradwire::Error& e) {
      EXPECT_EQ(e.code(), gradwire::ErrorCode::InvalidArgument) << e.what();
      const std::string what = e.what();
      EXPECT_NE(what.find("rank " + std::to_string(g_rank)), std::string::npos) << what;
      EXPECT_NE(what.find(words), std::string::npos) << what;
    }
  };
  std::vector<at::Tensor> two{at::ones({4}), at::ones({4})}, one{at::ones({4 * g_size})};
  std::vector<at::Tensor> gathered{at::zeros({4 * g_size})};
  refused([&] { g_pg->allgather_into_tensor_coalesced(gathered, two)->wait(); },
          "2 inputs but 1 outputs");
  refused([&] { g_pg->reduce_scatter_tensor_coalesced(two, one)->wait(); },
          "1 inputs but 2 outputs");
  std::vector<at::Tensor> short_outs{at::zeros({4 * g_size + 1}), at::zeros({4 * g_size})};
  refused([&] { g_pg->allgather_into_tensor_coalesced(short_outs, two)->wait(); },
          "world size x its input");
  g_pg->barrier()->wait();
}

// What a user gets wrong, as clear errors: a dtype gradwire has no type for
// (InvalidArgument on the calling rank, before anything is sent), models
// that differ between ranks (torch's parameter check, over our allgather),
// and counts that differ (Mismatch on every rank). The last fails a
// collective, which ends gradwire in this process (the failure is reported
// to every rank and later collectives of any group are Aborted: Note
// [watchdog]), so it comes last, in the last test.
TEST(Errors, AreClear) {
  std::vector<at::Tensor> odd{at::ones({4}, at::kUInt16)};
  try {
    g_pg->allreduce(odd)->wait();
    ADD_FAILURE() << "a uint16 allreduce was not refused";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), gradwire::ErrorCode::InvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("rank " + std::to_string(g_rank)), std::string::npos) << what;
    EXPECT_NE(what.find("UInt16"), std::string::npos) << what;
  }

  // Each rank compares its shapes with rank 0's: the last rank's differ.
  const bool differs = g_size > 1 && g_rank == g_size - 1;
  std::vector<at::Tensor> params{at::zeros({3, differs ? 5 : 4})};
  try {
    c10d::verify_params_across_processes(g_pg, params, std::nullopt);
    EXPECT_FALSE(differs) << "different parameter shapes were not reported";
  } catch (const c10::Error& e) {
    EXPECT_TRUE(differs) << e.what();
    EXPECT_NE(std::string(e.what()).find("params[0] in this process with sizes [3, 5] appears "
                                         "not to match sizes of the same param in process 0"),
              std::string::npos) << e.what();
  }

  auto group = new_group("mismatch/");
  std::vector<at::Tensor> t{at::ones({8 + (g_rank == 0 ? 1 : 0)})};
  if (g_size > 1) {
    try {
      group->allreduce(t)->wait();
      ADD_FAILURE() << "an allreduce of different counts completed";
    } catch (const gradwire::Error& e) {
      EXPECT_EQ(e.code(), gradwire::ErrorCode::Mismatch) << e.what();
      EXPECT_NE(std::string(e.what()).find("different counts"), std::string::npos) << e.what();
    }
  }
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) {
    std::fprintf(stderr, "%s is not set: run under gwlaunch or torchrun\n", name);
    std::exit(2);
  }
  return std::atoi(v);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::torch::set_num_threads(1);  // ranks share the cores
  g_rank = env_int("RANK");
  g_size = env_int("WORLD_SIZE");
  // The launcher's MASTER_PORT is gradwire's own store (the test over an
  // existing Communicator); the c10d store is a file named after it, so
  // that concurrent jobs do not share one.
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/gradwire-pg-test-" +
                           std::to_string(env_int("MASTER_PORT"));
  int rc = 1;
  try {
    g_store = c10::make_intrusive<c10d::FileStore>(path, g_size);
    g_pg = new_group("world/");
    if (g_rank != 0) GTEST_FLAG_SET(brief, true);
    rc = RUN_ALL_TESTS();
    g_pg.reset();
    // The groups are failed by now (Errors.AreClear): the store says when
    // every rank is done with the file.
    g_store->set("done/" + std::to_string(g_rank), std::vector<uint8_t>{1});
    if (g_rank == 0) {
      for (int r = 0; r < g_size; ++r) g_store->get("done/" + std::to_string(r));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", g_rank, e.what());
    rc = 1;
  }
  g_pg.reset();
  g_store.reset();
  if (g_rank == 0) std::remove(path.c_str());
  return rc;
}

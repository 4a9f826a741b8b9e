// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Sharded data parallelism (ZeRO stages 1-3), framework-agnostic, beside the
// Reducer (gradwire/reducer.h). Two halves, as there:
//
//  * plan_shards: a pure function from the parameter list to flat Buckets,
//    each padded so that it splits into `world` equal shards whose size is a
//    multiple of an element alignment, and to the pieces of parameters every
//    rank's shard holds (and the inverse map). Tested without ranks.
//  * ShardedEngine: runs a plan each step. Backward: mark_ready(i) copies
//    gradient i (divided by the world size) into its Bucket; a complete
//    Bucket is launched at once, strictly in Bucket order, as an allreduce
//    (stage 1) or a reduce_scatter (stages 2 and 3), or their int8 form
//    (gradient_compression). finalize() waits.
//    step() updates this rank's shard of fp32 master weights with a
//    ShardOptimizer (unscaling, loss-scale overflow skip and global-norm
//    clipping on the way), casts it to the parameter dtype and, in stages 1
//    and 2, allgathers the updated parameters Bucket by Bucket (forward waits
//    per Bucket: wait_bucket / wait_parameter). In stage 3 the parameters
//    rest as shards: gather(unit) before a unit's forward and backward,
//    release(unit) after (or their int8 form: parameter_compression).
//
//   gradwire::ShardedEngine engine(*comm, params, gradwire::ShardAdam::make({.lr = 1e-3}),
//                                  {.stage = 2});
//   // forward reads engine.parameter(i) (wait_parameter(i) after a step)
//   engine.mark_ready(i, grad_i);   // from backward, any thread
//   engine.finalize();
//   engine.step();
//
// Memory per parameter of a bf16 model with Adam (N ranks): stage 1 holds
// 2 (parameters) + 2 (gradients) + 12/N (fp32 master, two moments); stage 2
// 2 + 14/N (the gradient shard); stage 3 16/N; plus the gradient Buckets in
// flight (stages 2 and 3: at most max_buckets_in_flight of them, Note
// [bounded gradient buffers] in src/sharded/engine_impl.h) and the units
// gathered (stage 3). memory() reports what the engine holds, by kind.
// Host memory only for now: CUDA parameters are refused (InvalidArgument).
#pragma once

#include "gradwire/export.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/device_stream.h"
#include "gradwire/reducer.h"
#include "gradwire/types.h"
#include "gradwire/work.h"

namespace gradwire {

// ---------------------------------------------------------------- planning

struct GRADWIRE_API ShardedParameter {
  size_t elements = 0;
  DataType dtype = DataType::Float32;  // float32, bfloat16, float16 (or float64)
  Device device;                       // host memory (CUDA: not yet)
  std::string name;                    // used in error messages
  // Stage 3: the unit (module) the parameter belongs to; a unit's
  // parameters are gathered and released together, and a Bucket never
  // holds two units' parameters. Units are numbered 0..U-1 in forward
  // order. Stages 1 and 2 plan as if every parameter were in unit 0.
  size_t unit = 0;
};

// Elements [offset, offset + count) of `parameter` lie at `shard_offset`
// elements into a rank's shard of a Bucket.
struct GRADWIRE_API ShardPiece {
  size_t parameter = 0;
  size_t offset = 0;
  size_t shard_offset = 0;
  size_t count = 0;
  bool operator==(const ShardPiece&) const = default;
};

struct GRADWIRE_API ShardedBucket {
  std::vector<size_t> parameters;  // parameter indices, in fill order
  std::vector<size_t> offsets;     // element offset of each in the flat Bucket
  size_t elements = 0;  // sum of the parameters' elements
  size_t padded = 0;    // elements rounded up to a multiple of world * alignment
  size_t shard = 0;     // padded / world: every rank's shard, a multiple of alignment
  DataType dtype = DataType::Float32;
  Device device;
  size_t unit = 0;
  // pieces[r]: the parameter pieces rank r's shard holds, in shard order;
  // shard elements that no piece covers are padding (always zero).
  std::vector<std::vector<ShardPiece>> pieces;
  bool operator==(const ShardedBucket&) const = default;
};

struct GRADWIRE_API ShardPlan {
  int world = 1;
  size_t alignment = 1;
  std::vector<ShardedBucket> buckets;  // in launch order (expected gradient completion)
  struct Location {
    size_t bucket = 0;
    size_t offset = 0;  // elements into the Bucket
    bool operator==(const Location&) const = default;
  };
  std::vector<Location> location;         // by parameter: the inverse map
  std::vector<std::vector<size_t>> units;  // by unit: its Buckets, ascending

  // Where elements [offset, offset + count) of `parameter` live: the rank
  // and shard position of each part, in parameter order (the inverse of
  // `pieces`). InvalidArgument for a range outside the parameter.
  struct Owner {
    int rank = 0;
    size_t bucket = 0;
    size_t offset = 0;        // elements into the parameter
    size_t shard_offset = 0;  // elements into that rank's shard of the Bucket
    size_t count = 0;
    bool operator==(const Owner&) const = default;
  };
  std::vector<Owner> owners(size_t parameter, size_t offset, size_t count) const;

  bool operator==(const ShardPlan&) const = default;
};

// Assigns parameters to Buckets and splits each Bucket into `world` shards.
// Rules (the Bucket rules of plan_buckets in gradwire/reducer.h, plus):
//  * a Bucket holds one dtype, one device and one unit; each (unit, dtype,
//    device) group fills its own open Bucket, with the caps counted on the
//    unpadded bytes, so the Buckets' contents do not depend on `world`
//    (only their padding and shard boundaries do);
//  * `order` lists every parameter once in the order gradients are expected
//    to become ready; empty means reverse registration order
//    (n-1, ..., 0), what autograd usually produces;
//  * Buckets are ordered by the position of their last parameter in
//    `order` (when they complete in backward);
//  * padded = round_up(elements, world * alignment): every rank's shard is
//    padded / world elements, a multiple of `alignment`. 0-element
//    parameters take part (they have a location) and add nothing.
// InvalidArgument: world < 1, alignment < 1, `order` not a permutation, a
// unit number not below the parameter count, sizes overflowing.
GRADWIRE_API ShardPlan plan_shards(const std::vector<ShardedParameter>& parameters, int world,
                                   const BucketCaps& caps = {}, size_t alignment = 32,
                                   const std::vector<size_t>& order = {});

// FNV-1a over the model: each parameter's elements, dtype and device kind,
// in order (not names: they are for messages; not units: they are a
// stage-3 layout, and a checkpoint moves between stages through a full
// state). What checkpoints record; the engine's construction check also
// compares the whole plan and options.
GRADWIRE_API uint64_t parameter_list_fingerprint(const std::vector<ShardedParameter>& parameters);

// ---------------------------------------------------------------- optimizers

// One Bucket's shard at optimizer time. Every array has `count` elements;
// padding elements (see `pieces`) hold zeros in master and grad and must
// stay zero (Adam and SGD keep them so: a zero gradient on a zero weight
// moves nothing).
struct GRADWIRE_API ShardView {
  size_t bucket = 0;
  size_t count = 0;
  float* master = nullptr;      // fp32 master weights, updated in place
  const float* grad = nullptr;  // fp32 averaged gradient: unscaled, clipped
  std::vector<float*> state;    // the optimizer's arrays, in state_names() order
  const std::vector<ShardPiece>* pieces = nullptr;
  uint64_t step = 0;  // 1-based: the optimizer step being taken
};

// An optimizer on flat fp32 shards. Its per-element state is arrays the
// engine allocates (one per state_names() entry, zero-initialised), so the
// engine saves, counts and re-shards them; hyperparameters are the
// optimizer's own.
class GRADWIRE_API ShardOptimizer {
 public:
  virtual ~ShardOptimizer();
  // Recorded in checkpoints; a checkpoint of another kind is refused.
  virtual std::string kind() const = 0;
  virtual std::vector<std::string> state_names() const = 0;
  virtual void step(const ShardView& shard) = 0;
  // The learning rate, for schedules (the built-ins use it).
  virtual void set_lr(double lr) = 0;
  virtual double lr() const = 0;
};

struct GRADWIRE_API AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled = false;  // true: AdamW (p -= lr wd p), false: L2 added to the gradient
};

// Adam / AdamW in the formulas of kernels/compress_math.h (Note [1-bit
// element math]): m = b1 m + (1-b1) g, v = b2 v + (1-b2) g g,
// p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) [+ wd p]), every operation
// rounded in float32 as written. State: exp_avg, exp_avg_sq.
class GRADWIRE_API ShardAdam : public ShardOptimizer {
 public:
  explicit ShardAdam(AdamOptions options = {});
  static std::shared_ptr<ShardAdam> make(AdamOptions options = {});
  std::string kind() const override;
  std::vector<std::string> state_names() const override;
  void step(const ShardView& shard) override;
  void set_lr(double lr) override { options_.lr = lr; }
  double lr() const override { return options_.lr; }
  const AdamOptions& options() const { return options_; }

 private:
  AdamOptions options_;
};

struct GRADWIRE_API SgdOptions {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// SGD with momentum as torch.optim.SGD computes it: d = g + wd p; on the
// first step buf = d, then buf = momentum buf + (1 - dampening) d;
// d = nesterov ? d + momentum buf : buf; p -= lr d. State: momentum_buffer
// (none without momentum).
class GRADWIRE_API ShardSgd : public ShardOptimizer {
 public:
  explicit ShardSgd(SgdOptions options = {});
  static std::shared_ptr<ShardSgd> make(SgdOptions options = {});
  std::string kind() const override;
  std::vector<std::string> state_names() const override;
  void step(const ShardView& shard) override;
  void set_lr(double lr) override { options_.lr = lr; }
  double lr() const override { return options_.lr; }

 private:
  SgdOptions options_;
};

// ---------------------------------------------------------------- state

// A set of parameter element ranges with everything a sharded job holds for
// them: what each rank saves (its pieces), and what a whole model is (every
// parameter whole: full_state(), the unsharded form a DDP job holds). Any
// engine loads from any set of states that covers its pieces, whatever
// world size and shard boundaries wrote them (re-sharding).
struct GRADWIRE_API ShardedState {
  uint64_t fingerprint = 0;  // parameter_list_fingerprint of the model
  int stage = 0;             // 1-3; 0: a full (unsharded) state
  int world = 1;             // of the writer
  int rank = 0;
  std::string optimizer;     // ShardOptimizer::kind()
  std::vector<std::string> state_names;
  uint64_t step = 0;         // optimizer steps taken
  float loss_scale = 1.0f;
  uint64_t good_steps = 0;   // steps since the loss scale last changed
  std::vector<DataType> dtypes;  // by parameter: the dtype of `values`
  struct Record {
    size_t parameter = 0;
    size_t offset = 0;  // elements into the parameter
    size_t count = 0;
    std::vector<std::byte> values;          // count elements of the parameter's dtype
    std::vector<float> master;              // count
    std::vector<std::vector<float>> state;  // per state name, count each
  };
  std::vector<Record> records;  // sorted by (parameter, offset), not overlapping
  // Gradient compression's error feedback (GradientCompressionOptions):
  // this rank's buffers, one per Bucket (padded float32 each), and the
  // fingerprint of the layout they belong to (plan, world size, options).
  // Not a shard of anything: an engine restores them only from the state of
  // its own rank written by an engine of the same layout, and otherwise
  // starts them at zero. Empty (layout 0) without error feedback and in a
  // full state.
  uint64_t error_feedback_layout = 0;
  std::vector<std::vector<float>> error_feedback;

  // "GWSHST01" | u32 version | header | records | error feedback
  // (little-endian; version 1, without the last part, is still read); decode()
  // bounds-checks every length against what is left and refuses anything
  // encode() would not write (a Protocol error naming `what`): it is input
  // from disk (Note [states are untrusted input]).
  std::string encode() const;
  static ShardedState decode(std::string_view bytes, const std::string& what);
};

// ---------------------------------------------------------------- engine

struct GRADWIRE_API LossScaling {
  // Dynamic loss scaling for float16 training: the framework multiplies the
  // loss by scale(); step() divides the gradients by it, and if any
  // gradient element on any rank is inf or NaN (one allreduce, shared with
  // clipping) skips the step on every rank and multiplies the scale by
  // `backoff`; after `growth_interval` good steps in a row it multiplies
  // the scale by `growth`.
  bool enabled = false;
  float initial = 65536.0f;
  float growth = 2.0f;
  float backoff = 0.5f;
  uint64_t growth_interval = 2000;
  float min_scale = 1.0f;
};

// Compressed gradient reduce-scatter (Note [compressed gradient
// reduce-scatter] in src/sharded/compressed.cpp): each rank's contribution
// to a Bucket travels as blockwise int8 with one float32 scale per block
// (gradwire/quantized.h's layout and guarantees: every shard is computed
// from the same wire bytes by the same code, so it does not depend on which
// rank reduces it), about a quarter of float32's bytes and half of
// bfloat16's.
enum class GradientCompression : uint8_t {
  None = 0,  // the plain reduce_scatter (stage 1: allreduce)
  Int8 = 1,
};

struct GRADWIRE_API GradientCompressionOptions {
  GradientCompression kind = GradientCompression::None;
  // Elements per float32 scale, 1 .. 65536 (QuantizedOptions::block_size).
  size_t block_size = 256;
  // Each rank keeps, per Bucket, the quantization error of its whole
  // contribution (padded elements of float32: 4 bytes per parameter
  // element on every rank, at every stage; memory().compression) and adds
  // it to the next step's (Note [quantization error feedback]). Saved in
  // state() and restored by load_state() at the same world size and
  // options (a resumed run continues bit for bit); anywhere else it
  // restarts at zero (ShardedState::error_feedback).
  bool error_feedback = true;
  // The backward passes after fewer than start_step optimizer steps
  // (optimizer_steps(), restored by load_state) reduce uncompressed, bit
  // for bit as with kind None: a warm-up, as PowerSGD's start_iter.
  uint64_t start_step = 0;
};

// Compressed parameter allgather, stage 3 (Note [compressed parameter
// allgather] in src/sharded/compressed.cpp): the gathers before a unit's
// forward and backward send this rank's shard of each Bucket as blockwise
// int8 with one float32 scale per block, and every rank, the shard's owner
// included, reads the dequantized values, so every rank computes with the
// same bits. Only the gathered copies are quantized: the fp32 master
// shards and the parameters at rest (state(), checkpoints) stay exact, and
// there is no error feedback (each gather quantizes the current weights
// afresh). The forward and backward see weights off by at most half a
// quantization step (block max / 254) per element. Stage 3 only: stages 1
// and 2 have no parameter gathers to compress (an InvalidArgument).
enum class ParameterCompression : uint8_t {
  None = 0,  // the plain allgather
  Int8 = 1,
};

struct GRADWIRE_API ParameterCompressionOptions {
  ParameterCompression kind = ParameterCompression::None;
  // Elements per float32 scale, 1 .. 65536 (QuantizedOptions::block_size).
  size_t block_size = 256;
  // Gathers while optimizer_steps() < start_step are the plain allgather,
  // bit for bit as with kind None: a warm-up.
  uint64_t start_step = 0;
};

struct GRADWIRE_API ShardedOptions {
  int stage = 2;  // 1: optimizer state, 2: + gradients, 3: + parameters
  BucketCaps caps;
  size_t alignment = 32;  // shard sizes are multiples of this many elements
  // Expected gradient ready order (plan_shards); empty: reverse registration.
  std::vector<size_t> order;
  // The dtype gradients are reduced in; nullopt: each Bucket's parameter
  // dtype. Float32 reduces 16-bit gradients in float32 (widened as they are
  // copied into the Bucket): twice the traffic, one rounding less.
  std::optional<DataType> reduce_dtype;
  // > 0: gradients are scaled so that their global L2 norm (over every
  // rank's shard: one allreduce) is at most this.
  double max_grad_norm = 0;
  LossScaling loss_scaling;
  // Gradients not marked ready by finalize() count as zeros on this rank
  // (else an error naming them), as ReducerOptions::find_unused_parameters.
  bool find_unused_parameters = false;
  // Stages 2 and 3: full-size gradient Buckets that may be in use at once
  // (filling or being reduced). A Bucket that needs one waits for the
  // oldest launched Bucket's reduction; Note [bounded gradient buffers].
  size_t max_buckets_in_flight = 4;
  // At construction, every rank's parameters become rank 0's (like DDP).
  bool broadcast_parameters = true;
  // Stages 1-3: the gradients' reduction as int8 (stage 1: a quantized
  // reduce-scatter and an exact allgather of the reduced shards).
  GradientCompressionOptions gradient_compression;
  // Stage 3: the parameters' gathers as int8 (ParameterCompressionOptions).
  ParameterCompressionOptions parameter_compression;
};

// Bytes the engine holds, by kind (host memory it allocated; what the
// framework holds is not counted).
struct GRADWIRE_API ShardedMemory {
  size_t parameters = 0;       // full parameter Buckets (stages 1, 2) or shards at rest (3)
  size_t gathered = 0;         // stage 3: full parameters of the units gathered now
  size_t peak_gathered = 0;    // ... the most at once so far
  size_t master = 0;           // fp32 master shards (0 where they alias float32 parameters)
  size_t optimizer_state = 0;  // the optimizer's arrays
  size_t gradients = 0;        // full gradient Buckets (1) or gradient shards (2, 3)
  size_t bucket_buffers = 0;   // stages 2, 3: full gradient Buckets allocated for reduction
  size_t bucket_buffer_count = 0;
  size_t scratch = 0;          // fp32 gradient widening, one Bucket shard
  // Gradient compression: the error-feedback buffers (full Buckets, float32),
  // stage 1's int8 wire buffers and one float32 accumulator shard (stages 2
  // and 3 keep their wire buffers in bucket_buffers). Parameter
  // compression: the int8 wire buffers of the Buckets gathered now.
  size_t compression = 0;
  size_t total() const {
    return parameters + gathered + master + optimizer_state + gradients + bucket_buffers + scratch +
           compression;
  }
};

// Threading contract: as the Reducer's (gradwire/reducer.h). mark_ready and
// mark_unused may run concurrently from any threads for distinct
// parameters; everything else is called between them by one thread. Every
// rank must build the engine over the same parameter list and options (the
// constructor checks, collectively) and call gather/release/step in the
// same order. Destroy it before its Communicator.
class GRADWIRE_API ShardedEngine {
 public:
  // Collective: compares every rank's plan fingerprint and options (a
  // Mismatch on every rank, naming the ranks that differ), allocates, and
  // initialises the parameters from `initial` (by parameter index: its
  // `elements` values of its dtype; a null pointer means zeros), rank 0's
  // if broadcast_parameters. `optimizer` may be null when the caller runs
  // its own optimizer through begin_step / gradient_view / end_step.
  ShardedEngine(Communicator& comm, std::vector<ShardedParameter> parameters,
                std::shared_ptr<ShardOptimizer> optimizer, ShardedOptions options = {},
                const std::vector<const void*>& initial = {});
  ~ShardedEngine();
  ShardedEngine(const ShardedEngine&) = delete;
  ShardedEngine& operator=(const ShardedEngine&) = delete;

  const ShardPlan& plan() const;
  const ShardedOptions& options() const;
  int stage() const;
  size_t size() const;  // parameters
  // The parameter list (stages 1, 2: every unit 0).
  const std::vector<ShardedParameter>& parameters() const;

  // ---- parameters
  // Stages 1, 2: where parameter i lives (its Bucket, valid for the
  // engine's life: the framework's tensor may alias it). After step() the
  // values are being allgathered: wait first. Stage 3: inside the gathered
  // unit, valid until release(unit); a unit that is not gathered is an
  // InvalidArgument naming the parameter and its unit.
  void* parameter(size_t i);
  // Waits for the allgather of parameter i's Bucket (or every Bucket) of
  // the last step; stage 3: for the unit's gather. Returns parameter(i).
  void* wait_parameter(size_t i);
  void wait_bucket(size_t bucket);
  void wait_parameters();

  // ---- stage 3 units
  // Starts allgathering the unit's parameters (no-op if gathered or in
  // flight): the next unit's, while this one computes.
  void prefetch(size_t unit);
  // prefetch + wait: the unit's parameters are readable through parameter().
  void gather(size_t unit);
  // Frees the unit's full parameters (after a pending prefetch completes).
  void release(size_t unit);
  bool gathered(size_t unit) const;
  size_t units() const;

  // ---- gradients (as Reducer)
  // Copies `grad` (elements of the parameter's dtype), divided by the world
  // size, into its Bucket; a complete Bucket is launched (in Bucket order).
  // Stage 1: grad may be gradient(i) (the Bucket itself: scaled in place).
  void mark_ready(size_t i, const void* grad);
  void mark_unused(size_t i);  // needs find_unused_parameters
  // Ends backward: unmarked parameters as zeros (find_unused_parameters) or
  // an error naming them; waits for every Bucket's reduction.
  void finalize();
  // Stage 1: parameter i's averaged gradient after finalize() (full, in its
  // Bucket, reduce dtype). Stages 2, 3: InvalidArgument (shards only).
  void* gradient(size_t i);

  class GRADWIRE_API NoSync {
   public:
    explicit NoSync(ShardedEngine& e);
    ~NoSync();
    NoSync(NoSync&& other) noexcept;
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    ShardedEngine* engine_;
  };
  // While alive, backward passes do not communicate (mark_ready does
  // nothing, finalize() returns): the framework accumulates gradients
  // locally and marks the sum ready in the next synchronised pass.
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  bool will_sync() const;

  // ---- the optimizer step
  // step() = begin_step(), optimizer->step(gradient_view(b)) for every
  // Bucket, end_step(); returns false if the step was skipped (a loss-scale
  // overflow). After finalize().
  bool step();
  // Unscales and checks the gradient shards (overflow, global norm; one
  // allreduce if loss scaling or clipping is on); false: skip (end_step()
  // then only lowers the loss scale and restarts the parameters' exchange).
  bool begin_step();
  // Bucket b's shard for an optimizer: fp32 master (in place), fp32
  // gradient (unscaled, clipped; widened into scratch that the next call
  // reuses) and the optimizer's state arrays (none without an optimizer).
  ShardView gradient_view(size_t bucket);
  // The fp32 master shard of Bucket b (count = plan().buckets[b].shard).
  float* master(size_t bucket);
  // Casts the master shards to the parameters and (stages 1, 2) starts
  // their allgather, first Buckets of the forward pass first.
  void end_step();
  uint64_t optimizer_steps() const;
  double last_grad_norm() const;  // of the last begin_step (NaN: none computed)
  float loss_scale() const;
  uint64_t skipped_steps() const;

  // ---- state
  // This rank's pieces (collective only in that nothing else may run).
  ShardedState state() const;
  // Collective: every parameter whole (stage 0), the same on every rank.
  ShardedState full_state();
  // Takes this rank's pieces (parameters, master, optimizer state) and the
  // step, loss scale and counters from `sources`, which together must cover
  // them: any world size's shards, or a full state. Not collective. Raises
  // InvalidArgument for another model (fingerprint), stage (unless a
  // source is a full state), optimizer kind or state layout, or a missing
  // range, and leaves the engine unchanged. Stages 1, 2: the parameters'
  // Buckets are rebuilt from the loaded pieces by one allgather each, so
  // this is collective there.
  void load_state(const std::vector<const ShardedState*>& sources);

  ShardedMemory memory() const;

 private:
  class Impl;  // src/sharded/engine_impl.h
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradwire

// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The libfabric Transport: one RDM endpoint with tagged messaging, driven
// by one engine thread with manual progress. Written for AWS EFA (memory
// registration, endpoint-bound MRs, provider keys, FI_CONTEXT2), tested
// here on shm and tcp;ofi_rxm.
//
// Note [ofi message splitting]: a message longer than the provider's
// max_msg_size is posted as several fabric operations ("pieces") of
// max_msg_size bytes (the last shorter) with the same tag. The receiver
// splits identically, and FI_ORDER_SAS (sends to one peer with one tag
// arrive in order) plus in-order matching of posted receives pair piece i
// with piece i. Without SAS splitting is refused. Both sides must therefore
// post the same length for split messages: a receiver that posts fewer
// pieces than were sent leaves the extra pieces unmatched, one that posts
// more never completes (the caller's deadline reports it).
//
// Note [ofi request completion]: a Request becomes Done or Failed only when
// its last piece has been reported, so done() means the provider no longer
// touches its buffer. The first error of any piece is the one reported.
#include "transport/ofi/transport.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <random>
#include <string_view>
#include <bit>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/raise.h"
#include "base/logging.h"
#include "base/shm_reclaim.h"
#include "base/fd.h"
#include "transport/ofi/registration_cache.h"
#include "transport/ofi/resources.h"

namespace gradwire::transport::ofi {
namespace {

constexpr uint32_t kApiVersion = FI_VERSION(1, 11);
constexpr int kCqBatch = 16;
// Everything about memory registration that we are able to honour; the
// provider clears the bits it does not need.
constexpr uint64_t kMrModeWeHonour =
    FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

// One per posted fabric operation. With FI_CONTEXT2 the provider owns the
// fi_context2 while the operation is in flight; it must come first so that
// a completion's op_context points at the whole struct.
struct OpContext {
  fi_context2 fi;
  Request* req = nullptr;  // nullptr once cancel_all() has given up on it
  MrCache::Entry* mr = nullptr;
  OpContext* next_free = nullptr;
  bool in_use = false;
  uint8_t lane = 0;  // the endpoint it was posted on (Note [connections that stall])
};
static_assert(offsetof(OpContext, fi) == 0);

// Free list of OpContexts grown in chunks: steady state allocates nothing,
// and addresses stay stable because chunks never move.
class ContextPool {
 public:
  OpContext* acquire() {
    if (free_ == nullptr) grow();
    OpContext* ctx = free_;
    free_ = ctx->next_free;
    *ctx = OpContext{};
    ctx->in_use = true;
    ++in_use_;
    return ctx;
  }
  void release(OpContext* ctx) {
    ctx->in_use = false;
    ctx->req = nullptr;
    ctx->mr = nullptr;
    ctx->next_free = free_;
    free_ = ctx;
    --in_use_;
  }
  template <typename Fn>
  void for_each_in_use(Fn&& fn) {
    for (auto& chunk : chunks_) {
      for (size_t i = 0; i < kChunk; ++i) {
        if (chunk[i].in_use) fn(&chunk[i]);
      }
    }
  }
  size_t in_use() const { return in_use_; }

 private:
  static constexpr size_t kChunk = 256;
  void grow() {
    chunks_.push_back(std::make_unique<OpContext[]>(kChunk));
    OpContext* chunk = chunks_.back().get();
    for (size_t i = 0; i < kChunk; ++i) {
      chunk[i].next_free = free_;
      free_ = &chunk[i];
    }
  }
  std::vector<std::unique_ptr<OpContext[]>> chunks_;
  OpContext* free_ = nullptr;
  size_t in_use_ = 0;
};

// A failed request's status in the contract's terms (Note [transport
// contract]): libfabric's error numbers stay in this folder. `errnum` is
// positive (FI_E* or an errno).
RequestStatus status_of(int errnum) {
  switch (errnum) {
    case FI_ETRUNC:
    case FI_EMSGSIZE: return RequestStatus::Truncated;
    case FI_ECANCELED: return RequestStatus::Cancelled;
    case ECONNRESET:
    case ECONNREFUSED:
    case ENOTCONN:
    case EPIPE:
    case EHOSTUNREACH:
    case ECONNABORTED: return RequestStatus::PeerLost;
    default: return RequestStatus::Failed;
  }
}

// Records the first failure of a request (the caller sets its state).
void fail(Request& req, int errnum, std::string message) {
  req.status = status_of(errnum);
  req.error_code = errnum;
  req.error = std::move(message);
}

InfoPtr make_hints(const std::string& provider, bool directed, fi_threading threading) {
  InfoPtr hints = allocate_info();
  if (!hints) raise(ErrorCode::Internal, "fi_allocinfo: out of memory");
  hints->caps = FI_TAGGED | FI_MSG | (directed ? FI_DIRECTED_RECV : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;  // we give every operation a fi_context2
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = kMrModeWeHonour;
  hints->domain_attr->threading = threading;
  // Progress left unspecified: we accept what is offered and always drive
  // progress by reading the CQ.
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  return hints;
}

// fi_getinfo; nullptr when nothing matches (-FI_ENODATA).
InfoPtr get_info(const fi_info* hints, const std::string& provider) {
  fi_info* list = nullptr;
  int rc = libfabric().getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list);
  if (rc == -FI_ENODATA) return nullptr;
  if (rc != 0) {
    raise(ErrorCode::Transport, "fi_getinfo for provider '{}' failed: {} ({})", provider,
          libfabric().strerror(-rc), rc);
  }
  return InfoPtr(list);
}

// The entry of `list` for `iface` ("" = the first). Among several entries on
// one interface (tcp lists IPv4 and IPv6 for "lo") IPv4 wins, so "lo" means
// 127.0.0.1.
const fi_info* pick_entry(const fi_info* list, const std::string& iface) {
  const fi_info* first = nullptr;
  for (const fi_info* p = list; p != nullptr; p = p->next) {
    if (!iface.empty() && (p->domain_attr->name == nullptr || iface != p->domain_attr->name)) {
      continue;
    }
    if (p->addr_format == FI_SOCKADDR_IN) return p;
    if (first == nullptr) first = p;
  }
  return first;
}

std::string domain_names(const fi_info* list) {
  std::vector<std::string> names;
  for (const fi_info* p = list; p != nullptr; p = p->next) {
    std::string name = p->domain_attr->name ? p->domain_attr->name : "?";
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

// Chooses the fi_info for `config`: directed receives if the provider has
// them (then without), FI_THREAD_DOMAIN if offered (then FI_THREAD_SAFE).
InfoPtr choose_info(const Config& config) {
  std::string offered;
  for (bool directed : {true, false}) {
    for (fi_threading threading : {FI_THREAD_DOMAIN, FI_THREAD_SAFE}) {
      InfoPtr hints = make_hints(config.provider, directed, threading);
      InfoPtr list = get_info(hints.get(), config.provider);
      if (!list) {
        log().debug("provider '{}' offers nothing with directed_recv={} threading={}",
                    config.provider, directed, libfabric().tostr(&threading, FI_TYPE_THREADING));
        continue;
      }
      if (const fi_info* entry = pick_entry(list.get(), config.iface)) {
        InfoPtr chosen(libfabric().dupinfo(entry));
        if (!chosen) raise(ErrorCode::Internal, "fi_dupinfo: out of memory");
        return chosen;
      }
      offered = domain_names(list.get());
    }
  }
  if (!offered.empty()) {
    raise(ErrorCode::InvalidArgument,
          "provider '{}' has no domain named '{}' (iface); it offers: {}", config.provider,
          config.iface, offered);
  }
  auto available = available_providers();
  raise(ErrorCode::InvalidArgument,
        "libfabric provider '{}' is not available here for RDM tagged messaging; "
        "available: {}",
        config.provider, available.empty() ? "none" : fmt::format("{}", fmt::join(available, ", ")));
}

// Note [registration handles]: one fi_mr_reg of whole pages, closed when
// the handle goes.
class OfiRegistration final : public Registration {
 public:
  OfiRegistration(const Transport* owner, const void* base, size_t length, MrCache::Registered reg)
      : Registration(base, length), owner_(owner), reg_(std::move(reg)) {}
  void* desc() const { return reg_.desc; }
  const Transport* owner() const { return owner_; }

 private:
  const Transport* owner_;
  MrCache::Registered reg_;
};

class OfiTransport final : public Transport {
 public:
  explicit OfiTransport(const Config& config) : config_(config) {
    info_ = choose_info(config);
    open_resources();
    fill_properties();
    if (props_.registration_required || config.always_register) {
      registrar_ = fabric_registrar(domain_.get(), eps_[0].get(), mr_mode_, props_.provider);
      mr_cache_ = std::make_unique<MrCache>(registrar_, config.mr_cache_entries);
    }
    log().debug(
        "rank {}: ofi transport on {} (fabric {}, domain {}): mr_mode {:#x}, max_msg_size {}, "
        "inject_size {}, directed_recv {}, ordered_sends {}, threading {}",
        config.rank, props_.provider, props_.fabric, info_->domain_attr->name, mr_mode_,
        props_.max_msg_size, props_.inject_size, props_.directed_recv, props_.ordered_sends,
        libfabric().tostr(&info_->domain_attr->threading, FI_TYPE_THREADING));
  }

  ~OfiTransport() override {
    if (pool_.in_use() > 0) {
      // Closing the endpoint (first member destroyed) stops the provider
      // from touching the remaining buffers: the last resort after a
      // cancel_all() the provider did not confirm.
      log().debug("rank {}: closing ofi endpoint with {} operations in flight", config_.rank,
                  pool_.in_use());
    }
    if (!shm_name_.empty()) shm::reclaim_now();  // Note [reclaiming dead regions]
  }

  const Properties& properties() const override { return props_; }
  std::string address() const override { return name_; }

  void connect(const std::vector<std::string>& addresses) override {
    if (!peers_.empty()) raise(ErrorCode::InvalidArgument, "rank {}: connect() called twice", config_.rank);
    std::vector<fi_addr_t> peers(addresses.size() * lanes_, FI_ADDR_NOTAVAIL);
    for (size_t r = 0; r < addresses.size(); ++r) {
      if (addresses[r].empty()) {
        raise(ErrorCode::InvalidArgument, "rank {}: empty fabric address for rank {}", config_.rank, r);
      }
      check_peer_address(r, addresses[r]);
      // Lane l's address is the l-th of the equal parts (binary formats
      // only: lanes_ > 1 needs a fixed-size address, see open_resources).
      int n = 0;
      const size_t part = addresses[r].size() / lanes_;
      for (int l = 0; l < lanes_; ++l) {
        n += fi_av_insert(av_.get(), addresses[r].data() + l * part, 1,
                          &peers[l * addresses.size() + r], 0, nullptr);
      }
      if (n != lanes_) {
        raise(ErrorCode::Transport,
              "rank {}: fi_av_insert of rank {}'s address failed on provider {} (returned {}: {}); "
              "do all ranks use the same provider?",
              config_.rank, r, props_.provider, n,
              n < 0 ? libfabric().strerror(-n) : "not inserted");
      }
    }
    peers_ = std::move(peers);
    ranks_ = addresses.size();
  }

  // fi_av_insert reads as many bytes as the provider's address format
  // holds, whatever a peer sent: a string address (shm's names) must end
  // within the blob, a binary one (sockaddr_in for tcp) must be exactly as
  // long as ours, or libfabric would read past the buffer.
  void check_peer_address(size_t r, const std::string& a) const {
    const bool string_format = info_->addr_format == FI_ADDR_STR;
    const bool ok = string_format ? a.size() <= 4096 && a.find('\0') != std::string::npos
                                  : a.size() == name_.size();
    if (!ok) {
      raise(ErrorCode::Protocol, "rank {}: rank {}'s fabric address is malformed for provider {} "
            "({} bytes, expected {}); do all ranks run the same gradwire and provider?",
            config_.rank, r, props_.provider, a.size(),
            string_format ? std::string("a NUL-terminated name") : std::to_string(name_.size()));
    }
  }

  void isend(Request& req, int peer, const void* buf, size_t length, uint64_t tag,
             Deadline deadline, const Registration* reg = nullptr) override {
    post(req, true, peer, const_cast<void*>(buf), length, tag, deadline, reg);
  }

  void irecv(Request& req, int peer, void* buf, size_t length, uint64_t tag,
             Deadline deadline, const Registration* reg = nullptr) override {
    post(req, false, peer, buf, length, tag, deadline, reg);
  }

  void irecv_any(Request& req, void* buf, size_t length, uint64_t tag, uint64_t ignore,
                 Deadline deadline) override {
    if (length > props_.max_msg_size) {
      raise(ErrorCode::InvalidArgument, "rank {}: a receive from any peer of {} bytes exceeds "
            "{}'s max_msg_size {}", config_.rank, length, props_.provider, props_.max_msg_size);
    }
    post(req, false, kAnyPeer, buf, length, tag, deadline, nullptr, ignore);
  }

  RegistrationPtr register_memory(const void* buf, size_t length) override {
    if (!mr_cache_ || length == 0) return nullptr;
    // Whole pages, as the cache registers (page_expand in memory.h).
    const AddressRange pages = page_expand(AddressRange::of(buf, length), system_page_size());
    MrCache::Registered reg = registrar_(reinterpret_cast<void*>(pages.begin), pages.length());
    return std::make_unique<OfiRegistration>(this, buf, length, std::move(reg));
  }

  int progress() override {
    fi_cq_tagged_entry entries[kCqBatch];
    ssize_t n = fi_cq_read(cq_.get(), entries, kCqBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        finish(static_cast<OpContext*>(entries[i].op_context), entries[i].len, 0, {});
      }
      return static_cast<int>(n);
    }
    if (n == -FI_EAGAIN) return 0;
    if (n == -FI_EAVAIL) return read_error();
    raise(ErrorCode::Transport, "rank {}: fi_cq_read failed on provider {}: {} ({})", config_.rank,
          props_.provider, libfabric().strerror(static_cast<int>(-n)), n);
  }

  void cancel_all() override {
    pool_.for_each_in_use([this](OpContext* ctx) {
      if (ctx->req == nullptr) return;
      // -FI_ENOENT: already matched or completed; its completion will come.
      int rc = static_cast<int>(fi_cancel(&eps_[ctx->lane]->fid, &ctx->fi));
      if (rc != 0 && rc != -FI_ENOENT) {
        log().debug("rank {}: fi_cancel returned {}", config_.rank, libfabric().strerror(-rc));
      }
    });
    // Receives are what matters: a receive the provider still holds may
    // write into its buffer. Sends only read theirs, and may wait for a peer
    // that is gone, so they do not hold us up.
    Deadline deadline = Deadline::after(std::chrono::milliseconds(config_.cancel_timeout_ms));
    try {
      while (pending_receives() > 0 && !deadline.expired()) {
        if (progress() == 0) std::this_thread::yield();
      }
      while (progress() > 0) {
      }
    } catch (const Error& e) {
      log().warn("rank {}: completion queue failed while cancelling: {}", config_.rank, e.what());
    }
    // Give up on the rest: their requests end Failed and late completions are
    // dropped. The contexts (and their registrations) stay reserved until
    // the provider reports them or the endpoint is closed.
    size_t unconfirmed_receives = 0;
    pool_.for_each_in_use([&](OpContext* ctx) {
      Request* req = ctx->req;
      if (req == nullptr) return;
      ctx->req = nullptr;
      if (!req->is_send) ++unconfirmed_receives;
      if (req->status == RequestStatus::Ok) {
        fail(*req, FI_ECANCELED,
             fmt::format("rank {}: {} with peer {} (tag {:#x}) cancelled", config_.rank,
                         req->is_send ? "send" : "receive", req->peer, req->tag));
      }
      req->transport_private = 0;
      req->state = Request::State::Failed;
    });
    if (unconfirmed_receives > 0) {
      log().warn(
          "rank {}: provider {} did not confirm cancelling {} receive(s) within {} ms; their "
          "buffers may be written until this transport is destroyed",
          config_.rank, props_.provider, unconfirmed_receives, config_.cancel_timeout_ms);
    }
  }

  void invalidate(const void* buf, size_t length) override {
    if (mr_cache_) mr_cache_->invalidate(buf, length);
  }

  // The region stays mapped for the stuck thread; only its name goes, so
  // /dev/shm is clean when the process exits (the provider unlinks it when
  // the endpoint closes, which a leaked transport never does).
  void abandon() override {
    if (!shm_name_.empty() && ::shm_unlink(shm_name_.c_str()) == 0) {
      log().debug("rank {}: unlinked shm region {} of an abandoned transport", config_.rank,
                  shm_name_);
    }
  }

 private:
  void check(int rc, const char* call) const {
    if (rc != 0) {
      raise(ErrorCode::Transport, "rank {}: {} failed on provider {}: {} ({})", config_.rank, call,
            config_.provider, libfabric().strerror(-rc), rc);
    }
  }

  // Note [unique shm names]: libfabric's shm names an endpoint's shared
  // memory region after the process id ("<pid>:<uid>:<index>" in /dev/shm).
  // A process killed before it closed its endpoint leaves its region behind,
  // and a later process that gets the same pid fails fi_enable with EBUSY.
  // A name with a random part cannot collide with such leftovers (EFA names
  // its shm endpoints itself for the same reason). The provider takes the
  // name from fi_info's src_addr when the endpoint is opened (fi_setname
  // after fi_endpoint is too late in libfabric 1.17: the region keeps the
  // pid name), so the name goes there.
  void name_shm_endpoint() {
    static std::atomic<uint32_t> counter{0};
    std::random_device rd;
    const uint64_t nonce = (uint64_t(rd()) << 32) ^ rd();
    const std::string name = fmt::format("gw_{}_{:016x}_{}", ::getpid(), nonce, counter++);
    shm_name_ = name;
    std::free(info_->src_addr);
    info_->src_addr = ::strdup(name.c_str());
    if (!info_->src_addr) raise(ErrorCode::Internal, "rank {}: out of memory", config_.rank);
    info_->src_addrlen = name.size() + 1;
  }

  void open_resources() {
    fid_fabric* fabric = nullptr;
    check(libfabric().fabric(info_->fabric_attr, &fabric, nullptr), "fi_fabric");
    fabric_.reset(fabric);

    fid_domain* domain = nullptr;
    check(fi_domain(fabric_.get(), info_.get(), &domain, nullptr), "fi_domain");
    domain_.reset(domain);

    // Big enough for every operation the endpoint can have in flight, so the
    // CQ cannot overrun.
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;  // receives learn the received length
    cq_attr.wait_obj = FI_WAIT_NONE;       // we poll
    cq_attr.size = info_->tx_attr->size + info_->rx_attr->size;
    fid_cq* cq = nullptr;
    check(fi_cq_open(domain_.get(), &cq_attr, &cq, nullptr), "fi_cq_open");
    cq_.reset(cq);

    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;  // fi_addr_t are indices: cheap and predictable
    fid_av* av = nullptr;
    check(fi_av_open(domain_.get(), &av_attr, &av, nullptr), "fi_av_open");
    av_.reset(av);

    // (props_ is filled after this function.)
    const bool shm = std::string_view(info_->fabric_attr->prov_name) == "shm";
    if (shm) {
      shm::reclaim_once();  // Note [reclaiming dead regions]
      name_shm_endpoint();
    }
    // Note [connections that stall]: a second endpoint on the same CQ and
    // AV; its completions come back through the same progress().
    const std::string_view prov = info_->fabric_attr->prov_name;
    lanes_ = prov == "net" && info_->addr_format != FI_ADDR_STR ? 2 : 1;
    for (int l = 0; l < lanes_; ++l) {
      fid_ep* ep = nullptr;
      check(fi_endpoint(domain_.get(), info_.get(), &ep, nullptr), "fi_endpoint");
      eps_[l].reset(ep);
      check(fi_ep_bind(ep, &av_->fid, 0), "fi_ep_bind(av)");
      check(fi_ep_bind(ep, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
      check(fi_enable(ep), "fi_enable");
    }
    // The region exists now: hold its lock while this process lives, so
    // that another process's sweep never takes it for a dead one's.
    if (shm) {
      region_lock_.reset(shm::hold_region("/dev/shm/" + shm_name_));
      if (!region_lock_) {
        log().debug("rank {}: could not lock shm region {} (Note [reclaiming dead regions])",
                    config_.rank, shm_name_);
      }
    }

    // One address per lane, concatenated (equal sizes: a binary format).
    name_.clear();
    for (int l = 0; l < lanes_; ++l) {
      std::string name(64, '\0');
      size_t len = name.size();
      int rc = fi_getname(&eps_[l]->fid, name.data(), &len);
      if (rc == -FI_ETOOSMALL) {
        name.resize(len);
        rc = fi_getname(&eps_[l]->fid, name.data(), &len);
      }
      check(rc, "fi_getname");
      name.resize(len);
      if (l > 0 && name.size() != name_.size()) {
        raise(ErrorCode::Transport, "rank {}: {}'s endpoints have addresses of different sizes",
              config_.rank, props_.provider);
      }
      name_ += name;
    }
  }

  void fill_properties() {
    props_.provider = info_->fabric_attr->prov_name;
    props_.fabric = info_->fabric_attr->name ? info_->fabric_attr->name : "";
    mr_mode_ = info_->domain_attr->mr_mode;
    props_.registration_required = (mr_mode_ & FI_MR_LOCAL) != 0;
    size_t max_msg = info_->ep_attr->max_msg_size;
    if (config_.max_msg_size_override > 0) max_msg = std::min(max_msg, config_.max_msg_size_override);
    props_.max_msg_size = std::max<size_t>(max_msg, 1);
    // Never inject more than one piece: the receiver would split it.
    props_.inject_size = std::min(info_->tx_attr->inject_size, props_.max_msg_size);
    props_.directed_recv = (info_->caps & FI_DIRECTED_RECV) != 0;
    props_.ordered_sends = (info_->tx_attr->msg_order & FI_ORDER_SAS) &&
                           (info_->rx_attr->msg_order & FI_ORDER_SAS);
    // mem_tag_format: the highest set bit bounds the usable tag bits; 0
    // means the provider leaves all 64 to us.
    uint64_t format = info_->ep_attr->mem_tag_format;
    props_.tag_mask = format == 0 ? ~uint64_t{0} : ~uint64_t{0} >> std::countl_zero(format);
    props_.stalls_on_unexpected = lanes_ > 1;
  }

  size_t pending_receives() {
    size_t n = 0;
    pool_.for_each_in_use([&n](OpContext* ctx) { n += ctx->req != nullptr && !ctx->req->is_send; });
    return n;
  }

  static constexpr int kAnyPeer = -1;  // irecv_any

  void post(Request& req, bool is_send, int peer, void* buf, size_t length, uint64_t tag,
            Deadline deadline, const Registration* reg, uint64_t ignore = 0) {
    const char* op = is_send ? "send" : "receive";
    void* reg_desc = nullptr;
    if (reg != nullptr) {
      const auto* ours = dynamic_cast<const OfiRegistration*>(reg);
      const OfiRegistration* mine = ours != nullptr && ours->owner() == this ? ours : nullptr;
      if (mine == nullptr || !reg->covers(buf, length)) {
        raise(ErrorCode::InvalidArgument,
              "rank {}: {} of {} bytes at {} with peer {} names a registration of [{}, +{}) that "
              "{}", config_.rank, op, length, buf, peer, reg->base(), reg->length(),
              mine == nullptr ? "another transport made" : "does not cover the buffer");
      }
      reg_desc = mine->desc();
    }
    const bool any_peer = !is_send && peer == kAnyPeer;
    if (!any_peer && (peer < 0 || static_cast<size_t>(peer) >= ranks_)) {
      raise(ErrorCode::InvalidArgument, "rank {}: {} to/from peer {} but {} ranks are connected",
            config_.rank, op, peer, ranks_);
    }
    if (req.state == Request::State::Pending) {
      raise(ErrorCode::InvalidArgument, "rank {}: {} posted on a Request that is still pending",
            config_.rank, op);
    }
    if (tag & ~props_.tag_mask) {
      raise(ErrorCode::InvalidArgument, "rank {}: tag {:#x} has bits outside {}'s tag mask {:#x}",
            config_.rank, tag, props_.provider, props_.tag_mask);
    }
    size_t piece = props_.max_msg_size;
    size_t pieces = length == 0 ? 1 : (length - 1) / piece + 1;
    if (pieces > 1 && !props_.ordered_sends) {
      raise(ErrorCode::InvalidArgument,
            "rank {}: {} of {} bytes exceeds {}'s max_msg_size {} and the provider does not "
            "order sends (no FI_ORDER_SAS), so it cannot be split (Note [ofi message splitting])",
            config_.rank, op, length, props_.provider, piece);
    }
    if (pieces > INT_MAX) raise(ErrorCode::InvalidArgument, "rank {}: {} of {} bytes is too long", config_.rank, op, length);

    req = Request{};
    req.state = Request::State::Pending;
    req.is_send = is_send;
    req.peer = peer;
    req.tag = tag;
    req.length = length;
    const int lane = lanes_ > 1 && (tag & kSideLaneBit) ? 1 : 0;
    fid_ep* ep = eps_[lane].get();
    fi_addr_t addr = any_peer ? FI_ADDR_UNSPEC : peers_[lane * ranks_ + peer];

    // Small sends are copied out by the provider and never complete in the
    // CQ: the request is done as soon as fi_tinject accepts it.
    if (is_send && length <= props_.inject_size) {
      try {
        retry(req, "fi_tinject", deadline,
              [&] { return fi_tinject(ep, buf, length, addr, tag); });
      } catch (const std::exception& e) {
        req.state = Request::State::Failed;
        fail(req, FI_EAGAIN, e.what());
        throw;
      }
      req.state = Request::State::Done;
      return;
    }

    // Counted in full up front so that progress() driven by a retry below
    // cannot finish the request before all pieces are posted.
    req.transport_private = static_cast<int64_t>(pieces);
    fi_addr_t src = props_.directed_recv && !any_peer ? addr : FI_ADDR_UNSPEC;
    size_t posted = 0;
    try {
      for (; posted < pieces; ++posted) {
        size_t offset = posted * piece;
        size_t len = std::min(piece, length - offset);
        char* p = static_cast<char*>(buf) + offset;
        OpContext* ctx = pool_.acquire();
        try {
          ctx->req = &req;
          ctx->lane = static_cast<uint8_t>(lane);
          // A caller's registration, else the cache (Note [registration handles]).
          ctx->mr = mr_cache_ && reg == nullptr ? mr_cache_->lookup(p, len) : nullptr;
          void* desc = ctx->mr ? ctx->mr->desc : reg_desc;
          if (is_send) {
            retry(req, "fi_tsend", deadline,
                  [&] { return fi_tsend(ep, p, len, desc, addr, tag, &ctx->fi); });
          } else {
            retry(req, "fi_trecv", deadline,
                  [&] { return fi_trecv(ep, p, len, desc, src, tag, ignore, &ctx->fi); });
          }
        } catch (...) {
          if (ctx->mr) mr_cache_->release(ctx->mr);
          pool_.release(ctx);
          throw;
        }
      }
    } catch (const std::exception& e) {
      // Pieces already posted still complete through progress(); the request
      // ends Failed once they have (Note [ofi request completion]).
      fail(req, FI_ECANCELED, e.what());
      req.transport_private -= static_cast<int64_t>(pieces - posted);
      if (req.transport_private == 0) req.state = Request::State::Failed;
      throw;
    }
  }

  // Posts with `call` until accepted. -FI_EAGAIN means the provider's queues
  // are full: drive our completion queue and retry until the deadline.
  template <typename Fn>
  void retry(const Request& req, const char* call, Deadline deadline, Fn&& fn) {
    for (;;) {
      ssize_t rc = fn();
      if (rc == 0) return;
      if (rc != -FI_EAGAIN) {
        raise(ErrorCode::Transport,
              "rank {}: {} with peer {} (tag {:#x}, {} bytes) failed on provider {}: {} ({})",
              config_.rank, call, req.peer, req.tag, req.length, props_.provider,
              libfabric().strerror(static_cast<int>(-rc)), rc);
      }
      if (deadline.expired()) {
        raise(ErrorCode::Timeout,
              "rank {}: {} with peer {} (tag {:#x}, {} bytes) was still refused (queue full, "
              "-FI_EAGAIN) at the deadline on provider {}; is peer {} alive and making progress?",
              config_.rank, call, req.peer, req.tag, req.length, props_.provider, req.peer);
      }
      progress();
      if (config_.while_refused) config_.while_refused();
    }
  }

  void finish(OpContext* ctx, size_t len, int err, const std::string& message) {
    if (ctx == nullptr) {
      log().warn("rank {}: completion without a context on provider {}", config_.rank, props_.provider);
      return;
    }
    Request* req = ctx->req;
    if (ctx->mr) mr_cache_->release(ctx->mr);
    pool_.release(ctx);
    if (req == nullptr) return;  // given up on by cancel_all()
    if (!req->is_send) req->received += len;
    if (err != 0 && req->status == RequestStatus::Ok) fail(*req, err, message);
    if (--req->transport_private == 0) {
      req->state = req->status != RequestStatus::Ok ? Request::State::Failed : Request::State::Done;
    }
  }

  int read_error() {
    fi_cq_err_entry err{};
    ssize_t rc = fi_cq_readerr(cq_.get(), &err, 0);
    if (rc == -FI_EAGAIN) return 0;
    if (rc < 0) {
      raise(ErrorCode::Transport, "rank {}: fi_cq_readerr failed on provider {}: {} ({})",
            config_.rank, props_.provider, libfabric().strerror(static_cast<int>(-rc)), rc);
    }
    // shm 1.17 reports some errors negated (-FI_ETRUNC); the contract is a
    // positive errno, so normalise.
    int errnum = err.err < 0 ? -err.err : err.err;
    if (errnum == 0) errnum = FI_EIO;
    auto* ctx = static_cast<OpContext*>(err.op_context);
    const Request* req = ctx ? ctx->req : nullptr;
    int peer = req ? req->peer : -1;
    uint64_t tag = req ? req->tag : err.tag;
    const char* op = req ? (req->is_send ? "send" : "receive") : "operation";
    std::string message;
    if (errnum == FI_ETRUNC) {
      // The lead maps this to Mismatch: the ranks disagree about a size.
      message = fmt::format(
          "rank {}: peer {} sent more than the {} bytes posted for tag {:#x} ({} bytes "
          "truncated): the ranks disagree about the message size",
          config_.rank, peer, req ? req->length : err.len, tag, err.olen);
    } else if (errnum == FI_ECANCELED) {
      message = fmt::format("rank {}: {} with peer {} (tag {:#x}) cancelled", config_.rank, op, peer, tag);
    } else {
      char buf[256] = {};
      const char* detail = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, buf, sizeof(buf));
      message = fmt::format("rank {}: {} with peer {} (tag {:#x}) failed on provider {}: {} ({}); {}",
                            config_.rank, op, peer, tag, props_.provider, libfabric().strerror(errnum),
                            errnum, detail ? detail : "");
    }
    finish(ctx, err.len, errnum, message);
    return 1;
  }

  Config config_;
  Properties props_;
  uint64_t mr_mode_ = 0;  // the domain's FI_MR_* bits (registration is ours to honour)
  std::string name_;
  // Lane l's address of rank r at [l * ranks_ + r] (Note [connections that stall]).
  std::vector<fi_addr_t> peers_;
  size_t ranks_ = 0;
  int lanes_ = 1;
  // Declared in open order; destroyed in reverse: ep, av, cq, MRs, domain,
  // fabric. The pool outlives the endpoint the contexts were given to.
  ContextPool pool_;
  InfoPtr info_;
  FabricPtr fabric_;
  DomainPtr domain_;
  std::string shm_name_;  // the shm provider's region name (Note [unique shm names])
  UniqueFd region_lock_;  // Note [reclaiming dead regions]
  MrCache::Registrar registrar_;  // set when buffers must be registered
  std::unique_ptr<MrCache> mr_cache_;
  CompletionQueuePtr cq_;
  AddressVectorPtr av_;
  std::array<EndpointPtr, 2> eps_;  // closed first, the side lane before the main one
};

}  // namespace

std::unique_ptr<Transport> open(const Config& config) {
  if (config.provider.empty()) {
    raise(ErrorCode::InvalidArgument, "rank {}: no libfabric provider named", config.rank);
  }
  return std::make_unique<OfiTransport>(config);
}

std::vector<std::string> available_providers() {
  InfoPtr hints = make_hints("", false, FI_THREAD_SAFE);
  InfoPtr list = get_info(hints.get(), "(any)");
  std::vector<std::string> names;
  for (const fi_info* p = list.get(); p != nullptr; p = p->next) {
    std::string name = p->fabric_attr->prov_name ? p->fabric_attr->prov_name : "";
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(name);
    }
  }
  return names;
}

}  // namespace gradwire::transport::ofi

// context.cpp: Go's context package (context.go) over goro's channels,
// mutex and timers.
//
// The tree has two layers:
//   - ctx_node: what a goro::context handle points to. Immutable once made:
//     its parent, its kind, the effective deadline, and for a value node the
//     key and value. Each node also caches a pointer to the cancellation
//     state that decides its done()/err(): its own for a cancellable node,
//     the nearest cancellable ancestor's otherwise (Go finds it by walking
//     up through the embedded parent contexts on each call).
//   - cancel_core: the mutable part of Go's cancelCtx/timerCtx: err, the
//     lazily made done channel, the set of cancellable children and the
//     deadline timer.
//
// Ownership, chosen so that no reference cycle outlives a cancellation:
//   node --parent--> node              (values and ancestors stay reachable)
//   node --core----> core              (own or nearest ancestor's)
//   core --children--> child core      (Go's children map: a child whose
//                                       handles are all gone is still
//                                       cancelled, closing a done channel
//                                       that goroutines may hold)
//   core ~~parent~~> parent core       (weak: only used to unregister)
//   core --timer--> after_func --> core (the pending timer keeps its context
//                                       alive, as in Go; cancel drops it)
//
// Locking, as Go's: each core has one goro::mutex; a canceller holds it
// from marking the context until the context and all of its descendants
// are done, taking the children's locks in turn (parent before child, the
// only order in which two are ever held). The walk is iterative, so deep
// trees do not use one stack frame per generation.
#include <atomic>
#include <cstdio>
#include <goro/context.hpp>
#include <goro/runtime.hpp>
#include <goro/sync.hpp>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace goro {

namespace {

// --- errors ---------------------------------------------------------------

class context_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "context"; }
  std::string message(int ev) const override {
    switch (static_cast<context_errc>(ev)) {
      case context_errc::canceled:
        return "context canceled";
      case context_errc::deadline_exceeded:
        return "context deadline exceeded";
    }
    return "unknown context error";
  }
  std::error_condition default_error_condition(int ev) const noexcept override {
    switch (static_cast<context_errc>(ev)) {
      case context_errc::canceled:
        return std::errc::operation_canceled;
      case context_errc::deadline_exceeded:
        // Go's DeadlineExceeded reports Timeout() == true.
        return std::errc::timed_out;
    }
    return std::error_condition(ev, *this);
  }
};

std::atomic<std::int64_t> live_states{0};

// One channel, closed once, handed out by done() of contexts that were
// cancelled before anyone asked for their channel (Go's closedchan).
// Deliberately never destroyed: goroutines may still call done() while
// static destructors run at exit.
const chan<void>& closed_chan() {
  static const chan<void>* c = [] {
    auto* ch = new chan<void>(make_chan<void>());
    ch->close();
    return ch;
  }();
  return *c;
}

}  // namespace

const std::error_category& context_category() noexcept {
  static const context_category_impl cat;
  return cat;
}

namespace detail {

// --- cancellation state (Go's cancelCtx and timerCtx) ---------------------

struct cancel_core {
  using list = std::vector<std::shared_ptr<cancel_core>>;

  // `state` values besides a context_errc: not done, and being cancelled
  // (only while the canceller holds mu).
  static constexpr int live = 0;
  static constexpr int cancelling = -1;

  // Guards done (before done_made is set), children and timer, and is held
  // by a canceller from marking this context until it is done.
  goro::mutex mu;
  // done is made on the first done() call, or set to closed_chan() by a
  // cancel that comes first; never reassigned once done_made is true, so
  // readers that see done_made copy it without the lock.
  std::atomic<bool> done_made{false};
  chan<void> done;
  // live, then cancelling (under mu), then the context_errc once done is
  // closed. err() reads it without the lock except while cancelling, so
  // err() is non-empty exactly when done is closed (Go's Err takes the
  // lock for the same effect).
  std::atomic<int> state{live};
  // Cancellable contexts to cancel along with this one (empty once
  // cancelled; a non-live state keeps new ones out).
  std::unordered_map<cancel_core*, std::shared_ptr<cancel_core>> children;
  // The nearest cancellable ancestor, to unregister from; set before this
  // core is shared and then immutable.
  std::weak_ptr<cancel_core> parent;
  // The deadline timer of a with_deadline context, until cancelled.
  std::optional<goro::timer> timer;
  // Why it was cancelled (Go's cancelCtx.cause): written by the canceller
  // before it publishes `state`, so whoever sees the state done reads it.
  std::error_code cause;
  // context_after_func: the function to start when this (childless) state
  // is cancelled, and who got to decide its fate first, the canceller
  // (which starts it) or the stop function (which drops it).
  std::function<void()> after;
  std::atomic<bool> after_decided{false};

  cancel_core() { live_states.fetch_add(1, std::memory_order_relaxed); }
  cancel_core(const cancel_core&) = delete;
  cancel_core& operator=(const cancel_core&) = delete;

  ~cancel_core() {
    // A tree of never-cancelled descendants whose handles are all gone dies
    // with its root: free it with a work list, not one stack frame per
    // generation (goroutine stacks are fixed-size). A descendant may still
    // be looked at through a child's weak parent pointer, so take its lock
    // while emptying it.
    list work;
    for (auto& [key, c] : children) work.push_back(std::move(c));
    children.clear();
    while (!work.empty()) {
      std::shared_ptr<cancel_core> c = std::move(work.back());
      work.pop_back();
      if (c.use_count() == 1) {
        std::lock_guard<goro::mutex> lk(c->mu);
        for (auto& [key, gc] : c->children) work.push_back(std::move(gc));
        c->children.clear();
      }
    }
    live_states.fetch_sub(1, std::memory_order_relaxed);
  }

  chan<void> get_done() {
    if (done_made.load(std::memory_order_acquire)) return done;
    std::lock_guard<goro::mutex> lk(mu);
    if (!done_made.load(std::memory_order_relaxed)) {
      done = make_chan<void>();
      done_made.store(true, std::memory_order_release);
    }
    return done;
  }

  int err() {
    int s = state.load(std::memory_order_acquire);
    if (s != cancelling) return s;
    // Being cancelled right now: its done channel is not closed yet. Wait
    // for the canceller, which holds mu until it is.
    std::lock_guard<goro::mutex> lk(mu);
    return state.load(std::memory_order_acquire);
  }

  // Go's cancelCtx.cancel (and timerCtx.cancel): cancels this context and
  // every descendant with e, then unregisters this one from its parent if
  // asked (descendants need not: their parents have dropped them). No-op
  // for a context that is already done. Caller holds a reference to *this.
  //
  // As in Go, a context's lock is held while its children are cancelled
  // (lock order: parent before child), so a cancel that returns, or that
  // meets a descendant being cancelled by someone else, finds the whole
  // subtree done. Unlike Go, each done channel is closed after those of
  // its descendants, so whoever sees a context done also sees all of its
  // descendants done. The walk keeps its path of locked contexts in an
  // explicit stack rather than recursing.
  void cancel(bool remove_from_parent, context_errc e, std::error_code why) {
    if (!why) why = make_error_code(e);
    struct frame {
      cancel_core* c;
      list kids;
      std::size_t next = 0;
    };
    std::vector<frame> path;
    list hold;                                 // keeps visited children alive
    std::vector<goro::timer> stopped;          // dropped after every unlock
    std::vector<std::function<void()>> start;  // context_after_func's

    auto enter = [&](cancel_core* c) {
      c->mu.lock();
      if (c->state.load(std::memory_order_relaxed) != live) {
        c->mu.unlock();  // already done (cancelling is never seen: we hold mu)
        return;
      }
      c->state.store(cancelling, std::memory_order_relaxed);
      frame f{c, {}, 0};
      f.kids.reserve(c->children.size());
      for (auto& [key, k] : c->children) f.kids.push_back(std::move(k));
      c->children.clear();
      path.push_back(std::move(f));
    };

    enter(this);
    while (!path.empty()) {
      frame& f = path.back();
      if (f.next < f.kids.size()) {
        cancel_core* k = f.kids[f.next].get();
        hold.push_back(std::move(f.kids[f.next++]));
        enter(k);  // may grow path: f is not used after this
        continue;
      }
      // Every child is done: close this one, publish its error, stop its
      // timer (its function holds a reference to this core; dropping the
      // timer breaks that cycle, and if it is firing right now its
      // goroutine will find the context done).
      cancel_core* c = f.c;
      if (c->done_made.load(std::memory_order_relaxed)) {
        c->done.close();
      } else {
        c->done = closed_chan();
        c->done_made.store(true, std::memory_order_release);
      }
      c->cause = why;
      c->state.store(static_cast<int>(e), std::memory_order_release);
      if (c->after && !c->after_decided.exchange(true))
        start.push_back(std::move(c->after));
      if (c->timer) {
        c->timer->stop();
        stopped.push_back(std::move(*c->timer));
        c->timer.reset();
      }
      c->mu.unlock();
      path.pop_back();
    }
    if (remove_from_parent) {
      if (std::shared_ptr<cancel_core> p = parent.lock()) p->remove_child(this);
    }
    for (auto& fn : start) goro::go(std::move(fn));
  }

  // The cause, once done (empty before).
  std::error_code get_cause() {
    if (err() == live) return {};
    return cause;  // written before the state err() saw
  }

  // Registers child to be cancelled with this context, or, if this one is
  // already done, cancels child at once with the same error (Go's
  // propagateCancel).
  void add_child(const std::shared_ptr<cancel_core>& child) {
    int e;
    std::error_code why;
    {
      std::lock_guard<goro::mutex> lk(mu);
      e = state.load(std::memory_order_relaxed);  // not cancelling: we hold mu
      if (e == live)
        children.emplace(child.get(), child);
      else
        why = cause;
    }
    if (e != live) child->cancel(false, static_cast<context_errc>(e), why);
  }

  void remove_child(cancel_core* child) {
    std::shared_ptr<cancel_core> gone;  // released after unlocking
    std::lock_guard<goro::mutex> lk(mu);
    auto it = children.find(child);
    if (it != children.end()) {
      gone = std::move(it->second);
      children.erase(it);
    }
  }
};

// --- the immutable tree ---------------------------------------------------

enum class node_kind : std::uint8_t {
  todo,
  cancel,
  deadline,
  value,
  without_cancel
};

struct ctx_node {
  node_kind kind;
  // Null: background (every chain ends in background or todo).
  std::shared_ptr<const ctx_node> parent;
  // Decides done()/err(): own state (cancel, deadline) or the nearest
  // cancellable ancestor's (value); null if nothing above can be cancelled.
  std::shared_ptr<cancel_core> core;
  // Own (deadline) or inherited deadline.
  std::optional<time_point> deadline;
  // value nodes: the key's address, its name and the value (a const T).
  const void* key = nullptr;
  const char* key_name = nullptr;
  std::shared_ptr<const void> val;

  explicit ctx_node(node_kind k) : kind(k) {}
  ctx_node(const ctx_node&) = delete;
  ctx_node& operator=(const ctx_node&) = delete;

  ~ctx_node() {
    // Free a long chain of nodes that only we keep alive iteratively
    // rather than recursively through ~shared_ptr. use_count() == 1 is
    // exact here: nodes are never referred to by weak pointers, so nobody
    // else can take a new reference. The fence orders our write after the
    // reads of threads whose references are gone (use_count is relaxed).
    std::shared_ptr<const ctx_node> p = std::move(parent);
    while (p && p.use_count() == 1) {
      std::atomic_thread_fence(std::memory_order_acquire);
      std::shared_ptr<const ctx_node> next =
          std::move(const_cast<ctx_node&>(*p).parent);
      p = std::move(next);
    }
  }
};

const void* ctx_value(const ctx_node* n, const void* key) noexcept {
  for (; n != nullptr; n = n->parent.get())
    if (n->kind == node_kind::value && n->key == key) return n->val.get();
  return nullptr;
}

context ctx_with_value(const context& parent, const void* key,
                       const char* key_name, std::shared_ptr<const void> val) {
  auto n = std::make_shared<ctx_node>(node_kind::value);
  n->parent = parent.n_;
  if (parent.n_) {
    n->core = parent.n_->core;
    n->deadline = parent.n_->deadline;
  }
  n->key = key;
  n->key_name = key_name;
  n->val = std::move(val);
  return context(std::move(n));
}

std::size_t context_num_children(const context& c) {
  if (!c.n_ || !c.n_->core) return 0;
  cancel_core& core = *c.n_->core;
  std::lock_guard<goro::mutex> lk(core.mu);
  return core.children.size();
}

std::int64_t context_live_states() noexcept {
  return live_states.load(std::memory_order_relaxed);
}

namespace {

// A new cancellable node under parent (not yet linked into the tree of
// cancellation states).
std::shared_ptr<ctx_node> new_cancellable(
    const std::shared_ptr<const ctx_node>& pn, node_kind kind) {
  auto n = std::make_shared<ctx_node>(kind);
  n->parent = pn;
  n->core = std::make_shared<cancel_core>();
  if (pn) {
    n->deadline = pn->deadline;
    n->core->parent = pn->core;
  }
  return n;
}

}  // namespace

}  // namespace detail

// --- public API -----------------------------------------------------------

chan<void> context::done() const {
  if (!n_ || !n_->core) return chan<void>();
  return n_->core->get_done();
}

std::error_code context::err() const noexcept {
  if (!n_ || !n_->core) return {};
  int e = n_->core->err();
  if (e == detail::cancel_core::live) return {};
  return make_error_code(static_cast<context_errc>(e));
}

std::optional<time_point> context::deadline() const noexcept {
  if (!n_) return std::nullopt;
  return n_->deadline;
}

void cancel_func::operator()() const noexcept {
  if (c_) c_->cancel(true, context_errc::canceled, {});
}

void cancel_cause_func::operator()(std::error_code why) const noexcept {
  if (c_) c_->cancel(true, context_errc::canceled, why);
}

context background() noexcept { return context(); }

context todo() noexcept {
  // Immutable and never cancellable; shared by every todo() and kept for
  // the life of the process.
  static const auto* node = new std::shared_ptr<const detail::ctx_node>(
      std::make_shared<detail::ctx_node>(detail::node_kind::todo));
  return context(*node);
}

std::pair<context, cancel_func> with_cancel(const context& parent) {
  auto n = detail::new_cancellable(parent.n_, detail::node_kind::cancel);
  std::shared_ptr<detail::cancel_core> core = n->core;
  if (parent.n_ && parent.n_->core) parent.n_->core->add_child(core);
  return {context(std::move(n)), cancel_func(std::move(core))};
}

std::pair<context, cancel_cause_func> with_cancel_cause(const context& parent) {
  auto n = detail::new_cancellable(parent.n_, detail::node_kind::cancel);
  std::shared_ptr<detail::cancel_core> core = n->core;
  if (parent.n_ && parent.n_->core) parent.n_->core->add_child(core);
  return {context(std::move(n)), cancel_cause_func(std::move(core))};
}

std::error_code cause(const context& c) {
  if (!c.n_ || !c.n_->core) return {};
  return c.n_->core->get_cause();
}

std::function<bool()> context_after_func(const context& ctx,
                                         std::function<void()> fn) {
  // A childless cancellation state registered under ctx's: cancelling ctx
  // reaches it and starts fn (Go's afterFuncCtx).
  auto core = std::make_shared<detail::cancel_core>();
  core->after = std::move(fn);
  if (ctx.n_ && ctx.n_->core) {
    core->parent = ctx.n_->core;
    ctx.n_->core->add_child(core);  // already done: starts fn now
  }
  return [core]() -> bool {
    if (core->after_decided.exchange(true)) return false;
    if (std::shared_ptr<detail::cancel_core> p = core->parent.lock())
      p->remove_child(core.get());
    // fn is never started now; drop it (and what it captured) here.
    std::lock_guard<goro::mutex> lk(core->mu);
    core->after = nullptr;
    return true;
  };
}

context without_cancel(const context& parent) {
  // Values stay reachable through the parent link; no cancellation state
  // and no deadline are inherited, so nothing derived from it is ever
  // registered with parent's.
  auto n =
      std::make_shared<detail::ctx_node>(detail::node_kind::without_cancel);
  n->parent = parent.n_;
  return context(std::move(n));
}

std::pair<context, cancel_func> with_deadline(const context& parent,
                                              time_point d) {
  if (parent.n_ && parent.n_->deadline && *parent.n_->deadline < d) {
    // The parent is done sooner anyway; its timer will cancel the child.
    return with_cancel(parent);
  }
  auto n = detail::new_cancellable(parent.n_, detail::node_kind::deadline);
  n->deadline = d;
  std::shared_ptr<detail::cancel_core> core = n->core;
  if (parent.n_ && parent.n_->core) parent.n_->core->add_child(core);

  const time_point now = std::chrono::steady_clock::now();
  if (d <= now) {
    core->cancel(true, context_errc::deadline_exceeded, {});
  } else {
    const auto dur = d - now;  // positive, no overflow (now > epoch)
    std::lock_guard<goro::mutex> lk(core->mu);
    if (core->state.load(std::memory_order_relaxed) ==
        detail::cancel_core::live) {
      // The timer runs this in a goroutine of its own; by then `d` has
      // passed on the runtime's monotonic clock (steady_clock's).
      core->timer.emplace(goro::after_func(
          std::chrono::duration_cast<std::chrono::nanoseconds>(dur),
          [core] { core->cancel(true, context_errc::deadline_exceeded, {}); }));
    }
  }
  return {context(std::move(n)), cancel_func(std::move(core))};
}

std::pair<context, cancel_func> with_timeout(const context& parent,
                                             std::chrono::nanoseconds timeout) {
  // now + timeout, saturated (each comparison is overflow-free).
  using dur = time_point::duration;
  const dur since = std::chrono::steady_clock::now().time_since_epoch();
  const dur t = std::chrono::duration_cast<dur>(timeout);
  time_point d;
  if (t > dur::zero() && since > dur::max() - t)
    d = time_point::max();
  else if (t < dur::zero() && since < dur::min() - t)
    d = time_point::min();
  else
    d = time_point(since + t);
  return with_deadline(parent, d);
}

std::string to_string(const context& c) {
  std::vector<const detail::ctx_node*> chain;
  for (const detail::ctx_node* n = c.n_.get(); n != nullptr;
       n = n->parent.get())
    chain.push_back(n);
  std::string s;
  if (chain.empty() || chain.back()->kind != detail::node_kind::todo)
    s = "context.Background";
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const detail::ctx_node& n = **it;
    switch (n.kind) {
      case detail::node_kind::todo:
        s += "context.TODO";
        break;
      case detail::node_kind::cancel:
        s += ".WithCancel";
        break;
      case detail::node_kind::deadline: {
        // Time left, as Go prints it after the deadline (in doubles:
        // saturated deadlines must not overflow).
        using secs = std::chrono::duration<double>;
        const double left =
            secs(n.deadline->time_since_epoch()).count() -
            secs(std::chrono::steady_clock::now().time_since_epoch()).count();
        char buf[64];
        std::snprintf(buf, sizeof buf, ".WithDeadline([%.6gs])", left);
        s += buf;
        break;
      }
      case detail::node_kind::without_cancel:
        s += ".WithoutCancel";
        break;
      case detail::node_kind::value:
        s += ".WithValue(";
        s += n.key_name ? n.key_name : "<unnamed key>";
        s += ")";
        break;
    }
  }
  return s;
}

}  // namespace goro

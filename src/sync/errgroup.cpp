// errgroup.cpp: golang.org/x/sync/errgroup's Group over goro::wait_group,
// goro::once and a chan<void> as the limit's semaphore (as Go's, a token
// per running goroutine).
//
// Invariants: every goroutine started by spawn() holds one wait_group count
// and, with a limit, one token in sem_, both given back when it ends (also
// by exception or goexit); err_ is written at most once, under err_once_,
// before that goroutine's done(), so wait() reads it after wg_.wait().
#include <goro/errgroup.hpp>
#include <stdexcept>
#include <string>

#include "runtime/g.hpp"
#include "runtime/tls.hpp"

namespace goro {

errgroup::errgroup(const context& parent) {
  auto [c, cancel] = with_cancel(parent);
  ctx_ = std::move(c);
  cancel_ = std::move(cancel);
}

errgroup::~errgroup() { wg_.wait(); }

void errgroup::set_limit(int n) {
  if (n < 0) {
    sem_ = chan<void>();
    return;
  }
  if (sem_ && sem_.len() != 0)
    throw std::logic_error("errgroup: modify limit while " +
                           std::to_string(sem_.len()) +
                           " goroutines in the group are still active");
  sem_ = make_chan<void>(static_cast<std::size_t>(n));
}

void errgroup::acquire_slot() {
  if (sem_) sem_.send();
}

bool errgroup::try_acquire_slot() { return !sem_ || sem_.try_send(); }

void errgroup::release_slot() noexcept {
  if (sem_) (void)sem_.try_recv();  // our own token is there
}

void errgroup::fail(std::exception_ptr e) {
  err_once_.call([&] {
    err_ = std::move(e);
    if (cancel_) cancel_();
  });
}

void errgroup::run(void* fn, call_fn call) {
  // Go's `defer g.done()`: runs on every way out, goexit's unwinding too.
  struct done_on_exit {
    errgroup* g;
    ~done_on_exit() {
      g->release_slot();
      g->wg_.done();
    }
  } d{this};
  try {
    call(fn);
  } catch (...) {
    // goexit's forced unwinding must go on (and is no failure, as Go's
    // Goexit in an errgroup goroutine).
    if (rt::G* gp = rt::getg(); gp != nullptr && gp->goexiting) throw;
    fail(std::current_exception());
  }
}

void errgroup::wait() {
  wg_.wait();
  if (cancel_) cancel_();
  if (err_) std::rethrow_exception(err_);
}

}  // namespace goro

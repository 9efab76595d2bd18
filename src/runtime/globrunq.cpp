// globrunq.cpp: the global run queue, unbounded, under sched.lock.
#include "runtime/globrunq.hpp"

#include "runtime/runq.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

namespace {
void publish_size() {
  sched.runqsize.store(sched.runq.size, std::memory_order_relaxed);
}
}  // namespace

void globrunqput(G* gp) {
  sched.runq.push_back(gp);
  publish_size();
}

void globrunqputbatch(g_queue* batch) {
  if (batch->empty()) return;
  if (sched.runq.tail)
    sched.runq.tail->schedlink = batch->head;
  else
    sched.runq.head = batch->head;
  sched.runq.tail = batch->tail;
  sched.runq.size += batch->size;
  *batch = g_queue{};
  publish_size();
}

G* globrunqget(P* pp, std::int32_t max) {
  std::int32_t size = sched.runq.size;
  if (size == 0) return nullptr;
  // Take a fair share: size/gomaxprocs + 1, at most what is there, at
  // most max, at most half a local ring (the caller's ring is empty here,
  // so the runqputs below cannot overflow back into this locked queue).
  std::int32_t n = size / gomaxprocs_now() + 1;
  if (n > size) n = size;
  if (max > 0 && n > max) n = max;
  if (n > std::int32_t(runq_size / 2)) n = runq_size / 2;
  G* gp = sched.runq.pop();
  n--;
  for (; n > 0; n--) runqput(pp, sched.runq.pop(), false);
  publish_size();
  return gp;
}

std::size_t globrunqsize() {
  lock_guard lk(sched.lock);
  return std::size_t(sched.runq.size);
}

G* globrunqget_for_test() {
  lock_guard lk(sched.lock);
  G* gp = sched.runq.pop();
  publish_size();
  return gp;
}

}  // namespace goro::rt

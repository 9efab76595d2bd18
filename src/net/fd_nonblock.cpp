// fd_nonblock.cpp: the blocking mode of descriptors goro::fd wraps.
//
// The poller needs O_NONBLOCK, and O_NONBLOCK belongs to the open file
// description, which dup()s, a forked child and the shell that started
// the program all share. A goro::fd that set the flag clears it again when
// the last goro::fd using that description is closed or released, so a
// plain blocking write on a dup of the pipe, or the terminal after the
// program exits, behaves as before (Go's os.File.Fd() likewise puts a
// descriptor back in blocking mode). Descriptors that were non-blocking
// already (every socket goro::net creates, or one the caller made
// non-blocking) are left alone.
//
// Descriptions are told apart by device and inode: two goro::fds wrapping
// dups of one pipe end share an entry, and the flag is cleared when the
// second one goes. (Two separate opens of one FIFO also share an entry;
// the flag is then cleared on the description closed last, a difference
// only a program that set O_NONBLOCK on one of them itself could see.)
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <utility>

#include "net/fd_internal.hpp"

namespace goro::detail {

namespace {

struct description {
  int users = 0;         // live goro::fds on it
  bool restore = false;  // goro set O_NONBLOCK: clear it after the last
};

using key = std::pair<dev_t, ino_t>;

// A plain std::mutex: held only around map operations, never across a
// park, and taken from goroutines and plain threads alike.
std::mutex table_mu;
std::map<key, description>* table = nullptr;  // leaked: used at exit too
// Entries in the table: wrapping a descriptor that was non-blocking
// already (every socket goro::net made) skips the lock while it is 0.
std::atomic<int> table_size{0};

}  // namespace

void nonblock_acquire(fd_state* s, int fl, const struct stat* st) {
  key k{st->st_dev, st->st_ino};
  if ((fl & O_NONBLOCK) != 0 && table_size.load(std::memory_order_acquire) == 0)
    return;
  std::lock_guard<std::mutex> lk(table_mu);
  if (table == nullptr) table = new std::map<key, description>;
  auto it = table->find(k);
  if ((fl & O_NONBLOCK) != 0 && it == table->end()) return;  // not ours
  if (it == table->end()) {
    it = table->emplace(k, description{}).first;
    table_size.fetch_add(1, std::memory_order_release);
  }
  it->second.users++;
  if ((fl & O_NONBLOCK) == 0) it->second.restore = true;
  s->nb_tracked = true;
  s->nb_key_dev = st->st_dev;
  s->nb_key_ino = st->st_ino;
}

void nonblock_release(fd_state* s) {
  if (!s->nb_tracked) return;
  s->nb_tracked = false;
  bool restore = false;
  {
    std::lock_guard<std::mutex> lk(table_mu);
    auto it = table->find(key{s->nb_key_dev, s->nb_key_ino});
    if (it == table->end()) return;
    if (--it->second.users > 0) return;
    restore = it->second.restore;
    table->erase(it);
    table_size.fetch_sub(1, std::memory_order_release);
  }
  if (!restore) return;
  int saved = errno;
  int fl = fcntl(s->sysfd, F_GETFL);
  if (fl >= 0 && (fl & O_NONBLOCK) != 0)
    (void)fcntl(s->sysfd, F_SETFL, fl & ~O_NONBLOCK);
  errno = saved;
}

}  // namespace goro::detail

// real.hpp: the C library's own versions of the calls goro interposes
// (interpose/*.cpp). libgoro defines read, poll, connect, nanosleep... so
// that a goroutine's blocking call parks it on the network poller; every
// one of them, and goro's own code that must not be interposed (the
// poller's eventfd, goro::net's non-blocking sockets), reaches the kernel
// through these pointers: the next definition in the symbol lookup order
// (libc's, or a sanitizer's interceptor), found with dlsym(RTLD_NEXT).
//
// Without interposition (TSan builds: TSan's interceptors must see every
// call from the thread that makes it, and a goroutine parked inside one
// would resume inside it on another thread) the pointers are the plain
// functions.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace goro::rt::sys {

struct real_fns {
  ssize_t (*read)(int, void*, size_t);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*readv)(int, const iovec*, int);
  ssize_t (*writev)(int, const iovec*, int);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
  ssize_t (*recvmsg)(int, msghdr*, int);
  int (*recvmmsg)(int, mmsghdr*, unsigned, int, timespec*);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  int (*sendmmsg)(int, mmsghdr*, unsigned, int);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*accept)(int, sockaddr*, socklen_t*);
  int (*accept4)(int, sockaddr*, socklen_t*, int);
  int (*poll)(pollfd*, nfds_t, int);
  int (*ppoll)(pollfd*, nfds_t, const timespec*, const sigset_t*);
  int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
  int (*pselect)(int, fd_set*, fd_set*, fd_set*, const timespec*,
                 const sigset_t*);
  int (*close)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*socket)(int, int, int);
  int (*socketpair)(int, int, int, int*);
  int (*pipe)(int*);
  int (*pipe2)(int*, int);
  int (*nanosleep)(const timespec*, timespec*);
  int (*clock_nanosleep)(clockid_t, int, const timespec*, timespec*);
  int (*usleep)(useconds_t);
  unsigned (*sleep)(unsigned);
};

extern real_fns real_table;
extern std::atomic<bool> real_resolved;
void resolve_real();

// The real functions (resolved on first use: a hook may run before main).
inline const real_fns& real() {
  if (__builtin_expect(!real_resolved.load(std::memory_order_acquire), 0))
    resolve_real();
  return real_table;
}

}  // namespace goro::rt::sys

// Buffered reader and writer (Go's bufio.Reader and bufio.Writer, in
// src/bufio/bufio.go). Errors are the source's or sink's exceptions; the
// reader keeps its invariant across them (a failed fill() consumed
// nothing), the writer records them and rethrows on every later call.
#include <algorithm>
#include <cstring>
#include <goro/bufio.hpp>

namespace goro::bufio {

namespace {
constexpr std::size_t min_reader_size = 16;  // as Go's NewReaderSize
}  // namespace

void sink::write_all(const char* buf, std::size_t n, std::size_t& done) {
  // goro::fd and goro::net::conn write everything or throw; a type of the
  // user's may stop short (as POSIX write), so keep going while it moves.
  while (done < n) {
    std::size_t k = write_(obj_, buf + done, n - done);
    if (k == 0) throw short_write();
    done += std::min(k, n - done);
  }
}

// ---------------------------------------------------------------------------
// reader
// ---------------------------------------------------------------------------

reader::reader(source src, std::size_t size)
    : src_(src),
      buf_(new char[std::max(size, min_reader_size)]),
      size_(std::max(size, min_reader_size)) {}

void reader::reset(source src) noexcept {
  src_ = src;
  r_ = w_ = 0;
  last_byte_ = -1;
}

std::size_t reader::fill() {
  if (r_ > 0) {
    std::memmove(buf_.get(), buf_.get() + r_, w_ - r_);
    w_ -= r_;
    r_ = 0;
  }
  if (w_ == size_) throw std::logic_error("bufio: tried to fill full buffer");
  // If read throws, w_ is unchanged: the buffered bytes are all still there.
  std::size_t n = src_.read(buf_.get() + w_, size_ - w_);
  w_ += std::min(n, size_ - w_);  // a source claiming more is not trusted
  return n;
}

std::size_t reader::read(void* buf, std::size_t n) {
  if (n == 0) return 0;
  if (r_ == w_) {
    if (n >= size_) {
      // Nothing buffered and a large request: skip the copy through buf_.
      std::size_t got = src_.read(buf, n);
      if (got > 0) {
        last_byte_ =
            static_cast<unsigned char>(static_cast<char*>(buf)[got - 1]);
      }
      return got;
    }
    // One read only, so that read() never blocks once it has some bytes.
    r_ = w_ = 0;
    if (fill() == 0) return 0;
  }
  std::size_t k = std::min(n, w_ - r_);
  std::memcpy(buf, buf_.get() + r_, k);
  r_ += k;
  last_byte_ = static_cast<unsigned char>(buf_[r_ - 1]);
  return k;
}

void reader::unread_byte() {
  // Valid when the last operation consumed a byte and that byte's slot is
  // still in front of r_, or the buffer is empty (it then holds just it).
  if (last_byte_ < 0 || (r_ == 0 && w_ > 0)) {
    throw std::logic_error("bufio: invalid use of UnreadByte");
  }
  if (r_ > 0) {
    r_--;
  } else {
    w_ = 1;  // r_ == w_ == 0
  }
  buf_[r_] = static_cast<char>(last_byte_);
  last_byte_ = -1;
}

std::string_view reader::peek(std::size_t n) {
  if (n > size_) throw buffer_full();
  last_byte_ = -1;
  while (w_ - r_ < n) {
    if (fill() == 0) break;  // end of stream: fewer than n
  }
  return {buf_.get() + r_, std::min(n, w_ - r_)};
}

std::size_t reader::discard(std::size_t n) {
  last_byte_ = -1;
  std::size_t left = n;
  for (;;) {
    std::size_t skip = std::min(left, w_ - r_);
    r_ += skip;
    left -= skip;
    if (left == 0) return n;
    if (fill() == 0) return n - left;
  }
}

bool reader::read_until(char delim, std::string& out) {
  // Bytes leave the buffer only when the delimiter is found, at end of
  // stream, or when the buffer is full without it; so a line that fits in
  // the buffer is intact in it if fill() throws.
  std::size_t scanned = 0;  // buf_[r_, r_ + scanned) holds no delim
  for (;;) {
    const char* from = buf_.get() + r_ + scanned;
    const void* hit = std::memchr(from, delim, w_ - r_ - scanned);
    if (hit != nullptr) {
      std::size_t end =
          static_cast<std::size_t>(static_cast<const char*>(hit) - buf_.get()) +
          1;
      out.append(buf_.get() + r_, end - r_);
      r_ = end;
      last_byte_ = static_cast<unsigned char>(delim);
      return true;
    }
    if (r_ == 0 && w_ == size_) {
      out.append(buf_.get(), size_);  // full, no delim: make room
      last_byte_ = static_cast<unsigned char>(buf_[size_ - 1]);
      r_ = w_ = 0;
    }
    scanned = w_ - r_;
    if (fill() == 0) {
      if (w_ > r_) {
        out.append(buf_.get() + r_, w_ - r_);
        last_byte_ = static_cast<unsigned char>(buf_[w_ - 1]);
      }
      r_ = w_;
      return false;
    }
  }
}

std::string reader::read_string(char delim) {
  std::string s;
  read_until(delim, s);
  return s;
}

bool reader::read_line(std::string& line) {
  line.clear();
  if (!read_until('\n', line) && line.empty()) return false;
  if (!line.empty() && line.back() == '\n') {
    line.pop_back();
    if (!line.empty() && line.back() == '\r') line.pop_back();
  }
  return true;
}

std::optional<std::string> reader::read_line() {
  std::string line;
  if (!read_line(line)) return std::nullopt;
  return line;
}

// ---------------------------------------------------------------------------
// writer
// ---------------------------------------------------------------------------

writer::writer(sink dst, std::size_t size)
    : dst_(dst),
      buf_(new char[size == 0 ? default_buffer_size : size]),
      size_(size == 0 ? default_buffer_size : size) {}

void writer::reset(sink dst) noexcept {
  dst_ = dst;
  n_ = 0;
  err_ = nullptr;
}

void writer::fail() {
  err_ = std::current_exception();
  throw;
}

void writer::flush() {
  if (err_) std::rethrow_exception(err_);
  if (n_ == 0) return;
  std::size_t done = 0;
  try {
    dst_.write_all(buf_.get(), n_, done);
  } catch (...) {
    // Keep what was not written, in order (Go's Flush does the same); the
    // error is sticky all the same.
    std::memmove(buf_.get(), buf_.get() + done, n_ - done);
    n_ -= done;
    fail();
  }
  n_ = 0;
}

void writer::flush_for_byte() {
  if (err_) std::rethrow_exception(err_);
  flush();  // the buffer is full
}

std::size_t writer::write(const void* buf, std::size_t n) {
  if (err_) std::rethrow_exception(err_);
  const char* p = static_cast<const char*>(buf);
  std::size_t left = n;
  while (left > size_ - n_) {
    if (n_ == 0) {
      // Nothing buffered and more than fits: write it through, no copy.
      std::size_t done = 0;
      try {
        dst_.write_all(p, left, done);
      } catch (...) {
        fail();
      }
      return n;
    }
    std::size_t k = size_ - n_;
    std::memcpy(buf_.get() + n_, p, k);
    n_ += k;
    p += k;
    left -= k;
    flush();
  }
  if (left > 0) std::memcpy(buf_.get() + n_, p, left);
  n_ += left;
  return n;
}

}  // namespace goro::bufio

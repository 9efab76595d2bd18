// goro — Go's runtime scheduler as a C++20 library.
//
// bufio.hpp: buffered I/O (Go's bufio package): reader, writer and
// scanner over anything that reads or writes bytes — goro::net::conn,
// goro::fd, or a type of your own with
//   std::size_t read(void* buf, std::size_t n);         // 0 = end of stream
//   std::size_t write(const void* buf, std::size_t n);  // throws on error
//
// The reader, writer and scanner hold a reference to that object (as Go's
// hold an io.Reader interface): it must outlive them. Each allocates its
// buffer once (4096 bytes by default, as Go's); the scanner's grows, by
// doubling, up to its maximum token size. In the steady state no call
// allocates, except those that return a new std::string (read_string,
// read_line(), text()); their out-parameter forms reuse the caller's.
//
// Errors are exceptions from the underlying read or write
// (goro::deadline_exceeded, std::system_error with EPIPE...), rethrown as
// they are. The reader stays consistent when one escapes: bytes already
// buffered stay buffered, so after set_read_deadline(later) the next call
// continues where the failed one stopped. The writer's errors are sticky as
// in Go: once a write or flush failed, every later one rethrows that error
// until reset(). The scanner, as Go's, stops at the first error and
// reports it through err().
//
// None of the three is safe for concurrent use by several goroutines (nor
// are Go's).
//
// Example (snippet: main):
//   int p[2];
//   if (::pipe(p) != 0) return 1;
//   goro::fd r(p[0]), w(p[1]);
//   goro::bufio::writer out(w);
//   out.write("one\r\ntwo\n");
//   out.flush();
//   w.close();
//   goro::bufio::scanner sc(r);
//   int lines = 0;
//   while (sc.scan()) lines++;  // "one", "two": \r\n and \n are stripped
//   return lines == 2 && !sc.err() ? 0 : 1;
#pragma once

#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace goro::bufio {

// Go's defaults: the reader's and writer's buffer size, the scanner's
// initial buffer and its maximum token size (bufio.MaxScanTokenSize).
inline constexpr std::size_t default_buffer_size = 4096;
inline constexpr std::size_t max_scan_token_size = 64 * 1024;

// reader::peek(n) with n larger than the buffer (Go's ErrBufferFull).
class buffer_full : public std::length_error {
 public:
  buffer_full() : std::length_error("bufio: buffer full") {}
};

// A token longer than the scanner's maximum (Go's ErrTooLong).
class token_too_long : public std::length_error {
 public:
  token_too_long() : std::length_error("bufio.Scanner: token too long") {}
};

// A write that made no progress (Go's io.ErrShortWrite): an underlying
// write() returned 0 for a non-empty buffer.
class short_write : public std::runtime_error {
 public:
  short_write() : std::runtime_error("short write") {}
};

template <class R>
concept byte_source = requires(R& r, void* p, std::size_t n) {
  { r.read(p, n) } -> std::convertible_to<std::size_t>;
};

template <class W>
concept byte_sink = requires(W& w, const void* p, std::size_t n) {
  { w.write(p, n) } -> std::convertible_to<std::size_t>;
};

class source;
class sink;
namespace detail {
// Not source/sink themselves: those are copied, never wrapped (a wrapped
// one would point at the copy it was made from).
template <class R>
concept wrappable_source = byte_source<R> && !std::same_as<R, source>;
template <class W>
concept wrappable_sink = byte_sink<W> && !std::same_as<W, sink>;
}  // namespace detail

// A non-owning, type-erased reference to a byte_source: one pointer to the
// object and one to a function that calls its read (no allocation).
class source {
 public:
  // Implicit, so that reader(conn) reads well.
  template <detail::wrappable_source R>
  source(R& r) noexcept : obj_(&r), read_(&call<R>) {}
  std::size_t read(void* buf, std::size_t n) { return read_(obj_, buf, n); }

 private:
  template <class R>
  static std::size_t call(void* obj, void* buf, std::size_t n) {
    return static_cast<R*>(obj)->read(buf, n);
  }
  void* obj_;
  std::size_t (*read_)(void*, void*, std::size_t);
};

// The same for a byte_sink. write_all() loops over short writes (a type
// of your own may write less than asked, as POSIX write does) and throws
// short_write if one writes nothing.
class sink {
 public:
  // Implicit, so that writer(conn) reads well.
  template <detail::wrappable_sink W>
  sink(W& w) noexcept : obj_(&w), write_(&call<W>) {}
  // Writes all n bytes; `done` counts those written, also when it throws.
  void write_all(const char* buf, std::size_t n, std::size_t& done);

 private:
  template <class W>
  static std::size_t call(void* obj, const void* buf, std::size_t n) {
    return static_cast<W*>(obj)->write(buf, n);
  }
  void* obj_;
  std::size_t (*write_)(void*, const void*, std::size_t);
};

// Go's bufio.Reader. Invariant: buf_[r_, w_) are the bytes read from the
// source and not yet consumed; 0 <= r_ <= w_ <= size_.
class reader {
 public:
  // size below 16 is raised to 16 (as Go's NewReaderSize).
  explicit reader(source src, std::size_t size = default_buffer_size);
  reader(const reader&) = delete;
  reader& operator=(const reader&) = delete;
  reader(reader&&) noexcept = default;
  reader& operator=(reader&&) noexcept = default;

  // Up to n bytes: buffered ones if any, else at most one read of the
  // source (straight into buf when n >= size()). 0 at end of stream.
  std::size_t read(void* buf, std::size_t n);
  // The next byte, or nullopt at end of stream.
  std::optional<char> read_byte() {
    if (r_ == w_ && fill() == 0) return std::nullopt;
    last_byte_ = static_cast<unsigned char>(buf_[r_]);
    return buf_[r_++];
  }
  // Puts back the last byte consumed (Go's UnreadByte): valid after read,
  // read_byte, read_until, read_string or read_line, even at end of stream.
  // Throws std::logic_error ("bufio: invalid use of UnreadByte") before any
  // read, after peek or discard, and twice in a row.
  void unread_byte();
  // The next n bytes without consuming them, reading the source as needed;
  // fewer only at end of stream. Throws buffer_full if n > size(). The
  // view is valid until the next call on this reader.
  std::string_view peek(std::size_t n);
  // Skips n bytes; returns how many were skipped (fewer only at EOF).
  std::size_t discard(std::size_t n);
  // Go's ReadBytes: appends to `out` everything up to and including
  // `delim`. Returns true if delim was found, false at end of stream
  // (`out` then ends with the bytes before it, possibly none). If the
  // source throws (a deadline), the bytes already moved to `out` stay
  // there and the rest stays buffered: calling again with the same `out`
  // completes the line, nothing lost.
  bool read_until(char delim, std::string& out);
  // Go's ReadString: the bytes up to and including delim; at end of stream
  // what was left, without delim (so a result that does not end in delim
  // means end of stream, as Go's err != nil). Lines that fit in the
  // buffer are not consumed when the source throws; a longer one is
  // (use read_until with your own string to keep it).
  std::string read_string(char delim);
  // A line without its "\n" or "\r\n" (simpler than Go's ReadLine: no
  // isPrefix, lines of any length); the last line may lack the newline.
  // nullopt / false at end of stream. The out form replaces `line`,
  // reusing its capacity. Same guarantee as read_string on exceptions.
  std::optional<std::string> read_line();
  bool read_line(std::string& line);

  std::size_t buffered() const noexcept { return w_ - r_; }
  std::size_t size() const noexcept { return size_; }
  // Drops the buffered bytes and reads from src from now on.
  void reset(source src) noexcept;

 private:
  // Moves the unread bytes to the front, then reads the source once into
  // the free space; returns the count (0: end of stream). Leaves the
  // invariant intact when the read throws.
  std::size_t fill();

  source src_;
  std::unique_ptr<char[]> buf_;
  std::size_t size_;
  std::size_t r_ = 0, w_ = 0;
  int last_byte_ = -1;  // for unread_byte; -1: none
};

// Go's bufio.Writer. Invariant: buf_[0, n_) are accepted bytes not yet
// written to the sink.
class writer {
 public:
  // size 0 becomes default_buffer_size (as Go's NewWriterSize).
  explicit writer(sink dst, std::size_t size = default_buffer_size);
  writer(const writer&) = delete;
  writer& operator=(const writer&) = delete;
  writer(writer&&) noexcept = default;
  writer& operator=(writer&&) noexcept = default;
  // Does not flush (as Go): call flush() before the writer goes away.
  ~writer() = default;

  // Accepts all n bytes and returns n, writing through to the sink when
  // the buffer fills; a write at least as large as the buffer goes
  // straight to the sink when nothing is buffered. Throws the sink's
  // error, and that same error on every later call (sticky).
  std::size_t write(const void* buf, std::size_t n);
  std::size_t write(std::string_view s) { return write(s.data(), s.size()); }
  void write_byte(char c) {
    if (n_ == size_ || err_) flush_for_byte();
    buf_[n_++] = c;
  }
  // Writes the buffered bytes to the sink.
  void flush();

  std::size_t buffered() const noexcept { return n_; }
  std::size_t available() const noexcept { return size_ - n_; }
  std::size_t size() const noexcept { return size_; }
  // Drops the buffered bytes and any sticky error; writes to dst from now.
  void reset(sink dst) noexcept;

 private:
  void flush_for_byte();
  [[noreturn]] void fail();  // records the exception in flight; rethrows

  sink dst_;
  std::unique_ptr<char[]> buf_;
  std::size_t size_;
  std::size_t n_ = 0;
  std::exception_ptr err_;
};

// What a split function returns (Go's SplitFunc results). advance: bytes
// of input consumed. token: the token, a view into the data given (or any
// storage that outlives the next scan()); nullopt means none — with
// advance 0, "give me more data". final_token: stop after this token (Go's
// ErrFinalToken); with no token, stop at once. To report an error, throw:
// the scanner stops and err() returns it.
// A constructor rather than an aggregate, so `return {n, data.substr(0, k)};`
// compiles without -Wmissing-field-initializers on every compiler.
struct split_result {
  split_result() = default;
  split_result(std::size_t adv,
               std::optional<std::string_view> tok = std::nullopt,
               bool final = false) noexcept
      : advance(adv), token(tok), final_token(final) {}

  std::size_t advance = 0;
  std::optional<std::string_view> token;
  bool final_token = false;
};

// data: the unconsumed input; at_eof: no more will come (end of stream or
// an error). Called with empty data only at EOF.
using split_func =
    std::function<split_result(std::string_view data, bool at_eof)>;

// The standard split functions (Go's ScanLines, ScanWords, ScanBytes,
// ScanRunes). scan_lines drops the "\n" and a "\r" before it, and returns
// a last line without newline; scan_words splits on Unicode white space;
// scan_runes yields UTF-8 sequences, an invalid one as U+FFFD.
split_result scan_lines(std::string_view data, bool at_eof);
split_result scan_words(std::string_view data, bool at_eof);
split_result scan_bytes(std::string_view data, bool at_eof);
split_result scan_runes(std::string_view data, bool at_eof);

// Go's bufio.Scanner: while (sc.scan()) use(sc.bytes()); then check
// sc.err(). Tokens are lines by default.
class scanner {
 public:
  explicit scanner(source src, split_func split = scan_lines);
  scanner(const scanner&) = delete;
  scanner& operator=(const scanner&) = delete;
  scanner(scanner&&) noexcept = default;
  scanner& operator=(scanner&&) noexcept = default;

  // Advances to the next token; false at end of input or on an error.
  // A split function that keeps returning empty tokens at end of input
  // without advancing makes it throw std::logic_error after 100 of them
  // (Go panics): a bug in the split function, not an input error.
  bool scan();
  // The current token: a view valid until the next scan() (Go's Bytes),
  // or a copy (Go's Text).
  std::string_view bytes() const noexcept { return token_; }
  std::string text() const { return std::string(token_); }
  // The first error (token_too_long, the source's exception, a split
  // function's), or null at a clean end of stream (as Go, EOF is no error).
  std::exception_ptr err() const noexcept { return err_; }

  // Before the first scan() only (std::logic_error otherwise), as Go's:
  // the split function, and the initial buffer capacity and maximum token
  // size (the larger of the two).
  void split(split_func f);
  void buffer(std::size_t initial, std::size_t max);

 private:
  bool read_more();  // grows or compacts, then one read; false: stop

  source src_;
  split_func split_;
  std::unique_ptr<char[]> buf_;
  std::size_t cap_ = 0;  // allocated size of buf_
  std::size_t initial_ = default_buffer_size;
  std::size_t max_ = max_scan_token_size;
  std::size_t start_ = 0, end_ = 0;  // unconsumed input: buf_[start_, end_)
  std::string_view token_;
  std::exception_ptr err_;
  int empties_ = 0;   // consecutive empty tokens without progress at EOF
  bool eof_ = false;  // the source is done (end of stream or error)
  bool done_ = false;
  bool started_ = false;
};

}  // namespace goro::bufio

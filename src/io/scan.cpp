// Token scanner (Go's bufio.Scanner, in src/bufio/scan.go) and the
// standard split functions. The scanner owns a buffer that grows by
// doubling up to the maximum token size; a token is a view into it, valid
// until the next scan().
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <goro/bufio.hpp>

namespace goro::bufio {

namespace {

// Consecutive empty tokens at end of input that make no progress before
// the scanner gives up on a split function that loops (Go's limit).
constexpr int max_consecutive_empty_tokens = 100;

// U+FFFD, what scan_runes yields for an invalid UTF-8 sequence. A string
// literal: the token view stays valid forever.
constexpr std::string_view error_rune = "\xEF\xBF\xBD";

struct rune_info {
  char32_t rune;
  std::size_t width;  // 1 with rune U+FFFD for an invalid sequence
  bool complete;      // false: a valid prefix that needs more bytes
};

// Decodes the UTF-8 sequence at the start of s (non-empty). RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF.
rune_info decode_rune(std::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return {b0, 1, true};
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  char32_t r;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    r = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    r = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    r = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return {0xFFFD, 1, true};
  }
  for (std::size_t i = 1; i < len; i++) {
    if (i >= s.size()) return {0xFFFD, 1, false};
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) {
      return {0xFFFD, 1, true};
    }
    r = (r << 6) | (b & 0x3F);
  }
  return {r, len, true};
}

// Go's unicode.IsSpace.
bool is_space(char32_t r) {
  switch (r) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return r >= 0x2000 && r <= 0x200A;
  }
}

std::string_view drop_cr(std::string_view s) {
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

}  // namespace

split_result scan_bytes(std::string_view data, bool at_eof) {
  if (at_eof && data.empty()) return {};
  return {1, data.substr(0, 1)};
}

split_result scan_runes(std::string_view data, bool at_eof) {
  if (at_eof && data.empty()) return {};
  rune_info ri = decode_rune(data);
  if (!ri.complete && !at_eof) return {};  // wait for the rest
  if (ri.width == 1 && ri.rune == 0xFFFD) return {1, error_rune};
  return {ri.width, data.substr(0, ri.width)};
}

split_result scan_lines(std::string_view data, bool at_eof) {
  if (at_eof && data.empty()) return {};
  std::size_t nl = data.find('\n');
  if (nl != std::string_view::npos)
    return {nl + 1, drop_cr(data.substr(0, nl))};
  if (at_eof) return {data.size(), drop_cr(data)};  // last line, no newline
  return {};
}

split_result scan_words(std::string_view data, bool at_eof) {
  std::size_t start = 0;
  while (start < data.size()) {
    rune_info ri = decode_rune(data.substr(start));
    if (!is_space(ri.rune)) break;
    start += ri.width;
  }
  for (std::size_t i = start; i < data.size();) {
    rune_info ri = decode_rune(data.substr(i));
    if (is_space(ri.rune)) return {i + ri.width, data.substr(start, i - start)};
    i += ri.width;
  }
  if (at_eof && data.size() > start) return {data.size(), data.substr(start)};
  return {start, std::nullopt};  // skip the spaces, ask for more
}

scanner::scanner(source src, split_func split)
    : src_(src), split_(std::move(split)) {}

void scanner::split(split_func f) {
  if (started_) throw std::logic_error("bufio: Split called after Scan");
  split_ = std::move(f);
}

void scanner::buffer(std::size_t initial, std::size_t max) {
  if (started_) throw std::logic_error("bufio: Buffer called after Scan");
  initial_ = initial;
  max_ = std::max(initial, max);
}

bool scanner::scan() {
  if (done_) return false;
  started_ = true;
  for (;;) {
    // Try the split function on what we hold; at end of input it is called
    // even with nothing, so it can return a last token.
    if (end_ > start_ || eof_) {
      std::string_view data(buf_.get() + start_, end_ - start_);
      split_result res;
      try {
        res = split_(data, eof_);
      } catch (...) {
        err_ = std::current_exception();
        done_ = true;
        token_ = {};
        return false;
      }
      if (res.advance > data.size()) {
        err_ = std::make_exception_ptr(std::out_of_range(
            "bufio.Scanner: SplitFunc returns advance count beyond input"));
        done_ = true;
        token_ = {};
        return false;
      }
      start_ += res.advance;
      if (res.final_token) {
        done_ = true;
        token_ = res.token.value_or(std::string_view{});
        return res.token.has_value();
      }
      if (res.token) {
        token_ = *res.token;
        if (!eof_ || res.advance > 0) {
          empties_ = 0;
        } else if (++empties_ > max_consecutive_empty_tokens) {
          // A split function bug (Go panics): it would loop forever.
          throw std::logic_error(
              "bufio.Scan: too many empty tokens without progressing");
        }
        return true;
      }
    }
    if (eof_ || !read_more()) {
      start_ = end_ = 0;
      done_ = true;
      token_ = {};
      return false;
    }
  }
}

bool scanner::read_more() {
  // Slide the data to the front when the tail is full or the dead space
  // in front is more than half of the buffer.
  if (start_ > 0 && (end_ == cap_ || start_ > cap_ / 2)) {
    std::memmove(buf_.get(), buf_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
  }
  if (end_ == cap_) {
    // Full of one unfinished token: grow, up to the maximum token size.
    if (cap_ >= max_) {
      err_ = std::make_exception_ptr(token_too_long());
      return false;
    }
    std::size_t grown =
        cap_ == 0 ? (initial_ == 0 ? default_buffer_size : initial_) : cap_ * 2;
    grown = std::min(grown, max_);
    std::unique_ptr<char[]> bigger(new char[grown]);
    if (end_ > start_)
      std::memcpy(bigger.get(), buf_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
    buf_ = std::move(bigger);
    cap_ = grown;
  }
  try {
    std::size_t n = src_.read(buf_.get() + end_, cap_ - end_);
    if (n == 0) eof_ = true;
    end_ += std::min(n, cap_ - end_);
  } catch (...) {
    // As Go: the error ends the input; what is buffered is still split
    // (at_eof), then scan() returns false and err() reports it.
    err_ = std::current_exception();
    eof_ = true;
  }
  return true;
}

}  // namespace goro::bufio

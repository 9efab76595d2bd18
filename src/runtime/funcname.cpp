// funcname.cpp: see funcname.hpp.
#include "runtime/funcname.hpp"

namespace goro::rt {

std::string func_base_name(const std::string& s) {
  // The name starts after the last space outside brackets that comes
  // before the first '(' outside brackets (the parameter list);
  // "(anonymous namespace)" is part of a name, not a parameter list.
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (c == '(' && depth == 0) {
      static const char anon[] = "(anonymous namespace)";
      if (s.compare(i, sizeof anon - 1, anon) == 0) {
        i += sizeof anon - 2;
        continue;
      }
      break;
    }
    if (c == '<' || c == '(' || c == '{' || c == '[') depth++;
    if (c == '>' || c == ')' || c == '}' || c == ']') depth--;
    if (c == ' ' && depth == 0) start = i + 1;
  }
  return s.substr(start);
}

namespace {

// The end of the bracketed group that opens at s[i].
std::size_t group_end(const std::string& s, std::size_t i) {
  int depth = 0;
  for (; i < s.size(); i++) {
    char c = s[i];
    if (c == '<' || c == '(' || c == '{' || c == '[') depth++;
    if (c == '>' || c == ')' || c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return s.size();
}

std::string base_file(const std::string& path) {
  std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string func_print_name(const std::string& demangled,
                            const std::string& decl_file, int decl_line) {
  std::string s = func_base_name(demangled);
  std::size_t clone = s.find(" [clone ");
  if (clone != std::string::npos) s.erase(clone);
  static const char lam[] = "{lambda(";
  static const char op[] = "::operator()";
  std::string out;
  std::size_t i = 0;
  for (;;) {
    std::size_t at = s.find(lam, i);
    if (at == std::string::npos) {
      out.append(s, i, std::string::npos);
      return out;
    }
    out.append(s, i, at - i);
    std::size_t end = group_end(s, at);  // past "{lambda(...)#N}"
    // The call operator's own signature and qualifiers: up to the next
    // "::" at depth 0, or the end.
    std::size_t next = end;
    if (s.compare(end, sizeof op - 1, op) == 0) {
      next = end + sizeof op - 1;
      if (next < s.size() && s[next] == '(')
        next = group_end(s, next);  // "(...)" parameters
      std::size_t sep = s.find("::", next);
      next = sep == std::string::npos ? s.size() : sep;
    }
    // The lambda whose call operator this function is (its operator ends
    // the name) is named by its position; lambdas around it, or in
    // template arguments, just "lambda".
    bool own = next == s.size() && next != end;
    out += "lambda";
    if (own && !decl_file.empty() && decl_line > 0) {
      out += " at " + base_file(decl_file) + ":" + std::to_string(decl_line);
    } else if (own) {
      std::size_t hash = s.rfind('#', end);  // "{lambda()#2}" -> "lambda#2"
      if (hash != std::string::npos && hash > at)
        out.append(s, hash, end - 1 - hash);
    }
    i = next;
  }
}

}  // namespace goro::rt

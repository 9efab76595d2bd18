// report.cpp: statistics and report of bench/run.sh (no Python needed).
//
//   bench_report <raw results> <targets file> <csv out>
//
// Raw lines (written by run.sh; runs numbered from 1, warm-ups not recorded):
//   RESULT <runtime> <procs> <run> <workload> <metric> <value> <unit>
//   CHECK  <runtime> <procs> <run> <workload> <value>
//   FAIL   <runtime> <procs> <run> <workload> <reason...>
// Targets (bench/targets.txt), '#' starts a comment:
//   <metric> <procs|*> ratio_max   <x>   goro median / Go median <= x
//   <metric> <procs|*> ratio_min   <x>   goro median / Go median >= x (for
//                                         the few higher-is-better metrics)
//   <metric> <procs|*> abs_max     <x>   goro median <= x (metric's unit)
//   <metric> <procs>   scaling_max <x>   goro median at procs / at 1 P <= x
// Prints an aligned table (median, min-max per runtime, goro/Go ratio of the
// medians, target) and writes the same data as CSV. Lower is better for
// every metric except those with a ratio_min target (e.g. a kept fraction).
//
// Memory: the metrics <workload>.peak_rss (VmHWM, KiB), .page_tables (VmPTE
// at the end, KiB) and .minflt (minor faults), which every run of either
// runtime prints after its workload, are not rows of their own: their
// medians per (workload, GOMAXPROCS) appear as three columns ("goro / Go
// (ratio)") on the first row of that workload at that GOMAXPROCS, and as
// six CSV columns on every row of the workload.
// Exit status: 0 (a missed target is reported, not an error).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::vector<std::string> kRuntimes = {"goro", "go"};

struct series {
  std::vector<double> values;
};

struct stats {
  double median = NAN, min = NAN, max = NAN;
  std::size_t n = 0;
};

stats compute(std::vector<double> v) {
  stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  const std::size_t m = v.size() / 2;
  s.median = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  return s;
}

// The per-run memory metrics and their suffixes in the raw results.
enum mem_kind { kPeakRss, kPageTables, kMinflt, kMemKinds };
const char* const kMemSuffix[kMemKinds] = {".peak_rss", ".page_tables",
                                           ".minflt"};

// kMemKinds for any other metric.
int mem_kind_of(const std::string& metric) {
  for (int k = 0; k < kMemKinds; ++k) {
    const std::string suf = kMemSuffix[k];
    if (metric.size() > suf.size() &&
        metric.compare(metric.size() - suf.size(), suf.size(), suf) == 0)
      return k;
  }
  return kMemKinds;
}

struct target {
  std::string metric, procs, kind;
  double limit = 0;
};

// One row of the main table.
struct row_key {
  std::string metric;
  int procs;
  bool operator<(const row_key& o) const {
    return metric != o.metric ? metric < o.metric : procs < o.procs;
  }
};

std::string fmt(double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 1000)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 100)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (a >= 10)
    std::snprintf(buf, sizeof buf, "%.2f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string csv_num(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string range(const stats& s) {
  if (s.n == 0) return "-";
  return fmt(s.min) + ".." + fmt(s.max);
}

// A table printed with columns padded to their widest cell.
struct table {
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;  // right-align column i
  void print(std::ostream& out) const {
    std::vector<std::size_t> w;
    for (const auto& r : rows)
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (w.size() <= i) w.push_back(0);
        w[i] = std::max(w[i], r[i].size());
      }
    for (std::size_t ri = 0; ri < rows.size(); ++ri) {
      const auto& r = rows[ri];
      std::string line;
      for (std::size_t i = 0; i < r.size(); ++i) {
        const std::size_t pad = w[i] - r[i].size();
        const bool ra = i < right.size() && right[i];
        if (i) line += "  ";
        if (ra) line.append(pad, ' ');
        line += r[i];
        if (!ra && i + 1 < r.size()) line.append(pad, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out << line << '\n';
      if (ri == 0) {
        std::size_t total = 0;
        for (std::size_t i = 0; i < w.size(); ++i) total += w[i] + (i ? 2 : 0);
        out << std::string(total, '-') << '\n';
      }
    }
  }
};

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " <raw results> <targets> <csv out>\n";
    return 2;
  }
  std::ifstream raw(argv[1]);
  if (!raw) {
    std::cerr << "cannot read " << argv[1] << '\n';
    return 2;
  }

  // metric -> order of first appearance, unit, workload.
  std::vector<std::string> metric_order;
  std::map<std::string, std::string> unit_of, workload_of;
  std::map<row_key, std::map<std::string, series>> data;
  std::set<int> all_procs;
  // (workload, procs, runtime) -> failures
  std::map<std::tuple<std::string, int, std::string>, int> failures;
  std::map<std::tuple<std::string, int, std::string>, std::string> fail_reason;
  std::vector<std::string> workloads_seen;
  // (workload, procs) -> runtime -> memory kind -> values of the runs
  std::map<std::pair<std::string, int>,
           std::map<std::string, std::array<series, kMemKinds>>>
      mem;
  // workload -> runtime -> set of checksums
  std::map<std::string, std::map<std::string, std::set<std::string>>> checks;

  auto see_workload = [&](const std::string& w) {
    if (std::find(workloads_seen.begin(), workloads_seen.end(), w) ==
        workloads_seen.end())
      workloads_seen.push_back(w);
  };

  std::string line;
  while (std::getline(raw, line)) {
    std::istringstream in(line);
    std::string kind, rt, wl;
    int procs = 0, run = 0;
    if (!(in >> kind >> rt >> procs >> run >> wl)) continue;
    see_workload(wl);
    all_procs.insert(procs);
    if (kind == "RESULT") {
      std::string metric, unit;
      double value = 0;
      if (!(in >> metric >> value >> unit)) continue;
      if (const int k = mem_kind_of(metric); k != kMemKinds) {
        mem[{wl, procs}][rt][k].values.push_back(value);
        continue;
      }
      if (!unit_of.count(metric)) {
        metric_order.push_back(metric);
        unit_of[metric] = unit;
        workload_of[metric] = wl;
      }
      data[{metric, procs}][rt].values.push_back(value);
    } else if (kind == "CHECK") {
      std::string value;
      if (in >> value) checks[wl][rt].insert(value);
    } else if (kind == "FAIL") {
      std::string reason;
      std::getline(in, reason);
      auto k = std::make_tuple(wl, procs, rt);
      ++failures[k];
      fail_reason[k] = reason.empty() ? "failed" : reason.substr(1);
    }
  }

  std::vector<target> targets;
  if (std::ifstream tf(argv[2]); tf) {
    while (std::getline(tf, line)) {
      if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
      std::istringstream in(line);
      target t;
      if (in >> t.metric >> t.procs >> t.kind >> t.limit) targets.push_back(t);
    }
  }
  auto find_target = [&](const std::string& metric, int procs,
                         bool scaling) -> std::optional<target> {
    for (const auto& t : targets) {
      if (t.metric != metric) continue;
      if ((t.kind == "scaling_max") != scaling) continue;
      if (t.procs == "*" || t.procs == std::to_string(procs)) return t;
    }
    return std::nullopt;
  };

  // Workloads with failures but no result at all still get a row.
  for (const auto& w : workloads_seen) {
    bool has = false;
    for (const auto& [m, wl] : workload_of) has = has || wl == w;
    if (!has) {
      metric_order.push_back(w);
      unit_of[w] = "-";
      workload_of[w] = w;
    }
  }

  auto fail_note = [&](const std::string& wl, int procs,
                       const std::string& rt) -> std::string {
    auto k = std::make_tuple(wl, procs, rt);
    auto it = failures.find(k);
    if (it == failures.end()) return "";
    return rt + " failed " + std::to_string(it->second) + "x (" +
           fail_reason[k] + ")";
  };

  // Medians of a workload's memory at procs: [kind][0 goro, 1 go].
  auto mem_medians = [&](const std::string& wl, int procs) {
    std::array<std::array<double, 2>, kMemKinds> m;
    for (auto& a : m) a = {NAN, NAN};
    auto it = mem.find({wl, procs});
    if (it == mem.end()) return m;
    for (int r = 0; r < 2; ++r) {
      auto rit = it->second.find(kRuntimes[r]);
      if (rit == it->second.end()) continue;
      for (int k = 0; k < kMemKinds; ++k)
        m[k][r] = compute(rit->second[k].values).median;
    }
    return m;
  };
  // "goro / Go (ratio)", values divided by `scale`.
  auto mem_cell = [](const std::array<double, 2>& v, double scale) {
    if (std::isnan(v[0]) && std::isnan(v[1])) return std::string();
    std::string c = fmt(v[0] / scale) + " / " + fmt(v[1] / scale);
    if (!std::isnan(v[0]) && !std::isnan(v[1]) && v[1] != 0)
      c += " (" + fmt(v[0] / v[1]) + ")";
    return c;
  };
  // The first metric of each workload carries its memory columns.
  std::set<std::string> mem_shown;  // workloads whose first metric was seen

  std::ofstream csv(argv[3]);
  csv << "metric,workload,unit,gomaxprocs,goro_median,goro_min,goro_max,"
         "goro_n,go_median,go_min,go_max,go_n,ratio_goro_over_go,target,"
         "status,note,goro_peak_rss_kib,go_peak_rss_kib,goro_page_tables_kib,"
         "go_page_tables_kib,goro_minflt,go_minflt\n";

  table t;
  t.rows.push_back({"metric", "unit", "P", "goro med", "goro min..max", "n",
                    "Go med", "Go min..max", "n", "goro/Go", "target", "status",
                    "peak RSS MiB", "page tables MiB", "minflt k", "note"});
  // metric, unit | P, goro med, range, n, Go med, range, n, ratio | target,
  // status | memory x3 | note
  t.right = {false, false, true,  true,  true, true, true, true,
             true,  true,  false, false, true, true, true, false};

  int missed = 0, met = 0;
  for (const auto& metric : metric_order) {
    const bool first_of_workload = mem_shown.insert(workload_of[metric]).second;
    for (int procs : all_procs) {
      auto it = data.find({metric, procs});
      std::map<std::string, stats> st;
      for (const auto& rt : kRuntimes) {
        if (it != data.end() && it->second.count(rt))
          st[rt] = compute(it->second.at(rt).values);
        else
          st[rt] = stats{};
      }
      const std::string& wl = workload_of[metric];
      std::string note;
      for (const auto& rt : kRuntimes) {
        std::string f = fail_note(wl, procs, rt);
        if (!f.empty()) note += (note.empty() ? "" : "; ") + f;
      }
      if (st["goro"].n == 0 && st["go"].n == 0 && note.empty() &&
          !(first_of_workload && mem.count({wl, procs})))
        continue;
      const double ratio = st["goro"].median / st["go"].median;
      if (st["goro"].n && st["go"].n &&
          (st["goro"].max >= st["go"].min && st["go"].max >= st["goro"].min))
        note += (note.empty() ? "" : "; ") + std::string("ranges overlap");
      std::string tgt, status;
      if (auto tg = find_target(metric, procs, false)) {
        double v = NAN;
        bool at_least = false;  // v >= limit passes (else v <= limit)
        if (tg->kind == "ratio_max") {
          tgt = "ratio<=" + fmt(tg->limit);
          v = ratio;
        } else if (tg->kind == "ratio_min") {
          tgt = "ratio>=" + fmt(tg->limit);
          v = ratio;
          at_least = true;
        } else if (tg->kind == "abs_max") {
          tgt = "<=" + fmt(tg->limit);
          v = st["goro"].median;
        } else {
          tgt = tg->kind + "?";
        }
        if (std::isnan(v)) {
          status = "n/a";
        } else if (at_least ? v >= tg->limit : v <= tg->limit) {
          status = "ok";
          ++met;
        } else {
          status = "MISS";
          ++missed;
        }
      }
      const auto mm = mem_medians(wl, procs);
      std::string rss_c, pte_c, flt_c;
      if (first_of_workload) {
        rss_c = mem_cell(mm[kPeakRss], 1024);
        pte_c = mem_cell(mm[kPageTables], 1024);
        flt_c = mem_cell(mm[kMinflt], 1000);
      }
      t.rows.push_back({metric, unit_of[metric], std::to_string(procs),
                        fmt(st["goro"].median), range(st["goro"]),
                        std::to_string(st["goro"].n), fmt(st["go"].median),
                        range(st["go"]), std::to_string(st["go"].n), fmt(ratio),
                        tgt, status, rss_c, pte_c, flt_c, note});
      csv << csv_field(metric) << ',' << csv_field(wl) << ','
          << csv_field(unit_of[metric]) << ',' << procs << ','
          << csv_num(st["goro"].median) << ',' << csv_num(st["goro"].min) << ','
          << csv_num(st["goro"].max) << ',' << st["goro"].n << ','
          << csv_num(st["go"].median) << ',' << csv_num(st["go"].min) << ','
          << csv_num(st["go"].max) << ',' << st["go"].n << ',' << csv_num(ratio)
          << ',' << csv_field(tgt) << ',' << status << ',' << csv_field(note);
      for (int k = 0; k < kMemKinds; ++k)
        csv << ',' << csv_num(mm[k][0]) << ',' << csv_num(mm[k][1]);
      csv << '\n';
    }
  }
  t.print(std::cout);
  if (!mem.empty())
    std::cout << "memory columns, on the first row of each workload: median "
                 "over runs of peak RSS (VmHWM) and page tables (VmPTE, not "
                 "part of RSS), both read by the process after its workload, "
                 "and minor page faults of the whole run; goro / Go "
                 "(ratio)\n";

  // Scaling: median at P / median at 1 P, per runtime.
  if (all_procs.count(1) && all_procs.size() > 1) {
    table s;
    s.rows.push_back({"scaling (median at P / median at P=1)", "P", "goro",
                      "Go", "target", "status"});
    s.right = {false, true, true, true, false, false};
    for (const auto& metric : metric_order) {
      auto base = data.find({metric, 1});
      if (base == data.end()) continue;
      for (int procs : all_procs) {
        if (procs == 1) continue;
        auto it = data.find({metric, procs});
        if (it == data.end()) continue;
        std::map<std::string, double> sc;
        for (const auto& rt : kRuntimes) {
          double a = NAN, b = NAN;
          if (it->second.count(rt))
            a = compute(it->second.at(rt).values).median;
          if (base->second.count(rt))
            b = compute(base->second.at(rt).values).median;
          sc[rt] = a / b;
        }
        std::string tgt, status;
        if (auto tg = find_target(metric, procs, true)) {
          tgt = "goro<=" + fmt(tg->limit);
          if (std::isnan(sc["goro"])) {
            status = "n/a";
          } else if (sc["goro"] <= tg->limit) {
            status = "ok";
            ++met;
          } else {
            status = "MISS";
            ++missed;
          }
        }
        s.rows.push_back({metric, std::to_string(procs), fmt(sc["goro"]),
                          fmt(sc["go"]), tgt, status});
        csv << csv_field("scaling:" + metric) << ','
            << csv_field(workload_of[metric]) << ",ratio," << procs << "/1,"
            << csv_num(sc["goro"]) << ",,,," << csv_num(sc["go"]) << ",,,,"
            << csv_num(sc["goro"] / sc["go"]) << ',' << csv_field(tgt) << ','
            << status << ",,,,,,,\n";
      }
    }
    std::cout << '\n';
    s.print(std::cout);
  }

  // Checksums must agree across runtimes and runs.
  if (!checks.empty()) {
    std::cout << '\n';
    for (const auto& [wl, per_rt] : checks) {
      std::set<std::string> all;
      for (const auto& [rt, vals] : per_rt)
        all.insert(vals.begin(), vals.end());
      std::cout << "check " << wl << ": "
                << (all.size() == 1 ? "ok (" + *all.begin() + ")"
                                    : std::string("MISMATCH"))
                << '\n';
      if (all.size() != 1)
        for (const auto& [rt, vals] : per_rt)
          for (const auto& v : vals)
            std::cout << "  " << rt << ' ' << v << '\n';
    }
  }
  std::cout << "\ntargets: " << met << " met, " << missed << " missed\n";
  return 0;
}

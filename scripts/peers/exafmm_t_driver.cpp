// Our driver for exafmm-t (https://github.com/exafmm/exafmm-t, header-only):
// runs its Laplace or modified Helmholtz (Yukawa) FMM on points read from
// .npy files and writes the potentials and gradients, so that exafmm-t and
// our FMM can be run on the same points. Nothing of exafmm-t is copied here;
// this file only calls its public headers, exactly as its own tests do
// (tests/fmm_laplace.cpp, tests/fmm_modified_helmholtz.cpp).
//
// Built and run by scripts/peers/exafmm_t.sh (which passes exafmm-t's
// configure flags: SIMD, OpenMP, -lopenblas -lfftw3 -lfftw3f).
//
// Usage:
//   exafmm_t_driver --kernel laplace|yukawa [--k 20] --p P --ncrit C
//       --threads T --sources S.npy [--targets T.npy] --out OUT.npy
//       [--repeat R] [--cache DIR]
// S.npy: float64 (N, 4), columns x, y, z, q. T.npy: float64 (M, 3) or more
// columns (x, y, z first); without --targets the targets are the sources
// themselves (exafmm-t's P2P skips r = 0, so the self term drops out).
// OUT.npy: float64 (M, 4): potential, gradient x, y, z, in the targets'
// order, in exafmm-t's normalisation:
//   laplace: phi = sum q / (4 pi r),            grad = d phi / d x_target
//   yukawa:  phi = sum q exp(-k r) / (4 pi r),  grad = d phi / d x_target
//
// Timing (file I/O excluded): each of R runs builds a fresh tree and FMM
// object from copies of the bodies and times, like exafmm-t's own tests,
//   tree (get_bounds + build_tree), lists (init_rel_coord + build_list),
//   precompute (operators; cached in a file, see below), m2l_setup,
//   evaluation (upward + downward pass), total (their sum).
// The precomputed operators go to a file in --cache (default the current
// folder), as exafmm-t always does; the driver deletes it before the first
// run, so run 1 is cold (operators computed) and runs 2.. load them (warm),
// which is what exafmm-t's own test prints when rerun in the same folder.
// One JSON line on stdout: the first (cold) run, the median of all runs of
// each stage, the least total and evaluation, and every run's total.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "build_tree.h"
#include "build_list.h"
#include "laplace.h"
#include "modified_helmholtz.h"

using namespace exafmm_t;

namespace {

// ---- .npy (float64, C order, 2-D) ----
std::vector<double> read_npy(const std::string& path, size_t& rows, size_t& cols) {
  std::ifstream f(path, std::ios::binary);
  if (!f) { std::cerr << path << ": cannot open\n"; std::exit(2); }
  char magic[6];
  f.read(magic, 6);
  if (std::memcmp(magic, "\x93NUMPY", 6) != 0) { std::cerr << path << ": not .npy\n"; std::exit(2); }
  unsigned char ver[2];
  f.read(reinterpret_cast<char*>(ver), 2);
  size_t hlen = 0;
  if (ver[0] == 1) {
    unsigned char b[2]; f.read(reinterpret_cast<char*>(b), 2); hlen = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4]; f.read(reinterpret_cast<char*>(b), 4);
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (size_t(b[3]) << 24);
  }
  std::string header(hlen, ' ');
  f.read(&header[0], hlen);
  if (header.find("'<f8'") == std::string::npos) { std::cerr << path << ": not float64 ('<f8')\n"; std::exit(2); }
  if (header.find("'fortran_order': False") == std::string::npos) { std::cerr << path << ": Fortran order\n"; std::exit(2); }
  size_t s = header.find("'shape': (");
  if (s == std::string::npos) { std::cerr << path << ": no shape\n"; std::exit(2); }
  s += 10;
  rows = std::strtoull(header.c_str() + s, nullptr, 10);
  size_t comma = header.find(',', s);
  size_t close = header.find(')', s);
  cols = 1;
  if (comma != std::string::npos && comma < close) {
    std::string rest = header.substr(comma + 1, close - comma - 1);
    if (rest.find_first_of("0123456789") != std::string::npos) cols = std::strtoull(rest.c_str(), nullptr, 10);
  }
  std::vector<double> data(rows * cols);
  f.read(reinterpret_cast<char*>(data.data()), data.size() * sizeof(double));
  if (!f) { std::cerr << path << ": short read\n"; std::exit(2); }
  return data;
}

void write_npy(const std::string& path, const std::vector<double>& data, size_t rows, size_t cols) {
  std::ostringstream h;
  h << "{'descr': '<f8', 'fortran_order': False, 'shape': (" << rows << ", " << cols << "), }";
  std::string header = h.str();
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  unsigned short hl = header.size();
  f.put(hl & 0xff); f.put(hl >> 8);
  f.write(header.data(), header.size());
  f.write(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(double));
  if (!f) { std::cerr << path << ": write failed\n"; std::exit(2); }
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Times { double tree, lists, precompute, m2l_setup, evaluation, total; int depth; size_t leafs; };

// One full FMM run on copies of the bodies; the outputs go to `out`
// (targets' original order, 4 per target) when it is not null.
template <class F>
Times run_once(F& fmm, Bodies<real_t> sources, Bodies<real_t> targets, std::vector<double>* out) {
  Times t;
  double t0 = now();
  get_bounds(sources, targets, fmm.x0, fmm.r0);
  NodePtrs<real_t> leafs, nonleafs;
  Nodes<real_t> nodes = build_tree(sources, targets, leafs, nonleafs, fmm);
  double t1 = now();
  init_rel_coord();
  build_list(nodes, fmm);
  double t2 = now();
  fmm.precompute();
  double t3 = now();
  fmm.M2L_setup(nonleafs);
  double t4 = now();
  fmm.upward_pass(nodes, leafs, false);
  fmm.downward_pass(nodes, leafs, false);
  double t5 = now();
  t.tree = t1 - t0; t.lists = t2 - t1; t.precompute = t3 - t2;
  t.m2l_setup = t4 - t3; t.evaluation = t5 - t4; t.total = t5 - t0;
  t.depth = fmm.depth; t.leafs = leafs.size();
  if (out) {
    for (auto leaf : leafs) {
      const std::vector<int>& itrgs = leaf->itrgs;
      for (size_t j = 0; j < itrgs.size(); ++j)
        for (int c = 0; c < 4; ++c) (*out)[4 * size_t(itrgs[j]) + c] = leaf->trg_value[4 * j + c];
    }
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string kernel = "laplace", src_path, trg_path, out_path, cache = ".";
  double k = 20;
  int p = 5, ncrit = 300, threads = 2, repeat = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) { std::cerr << a << " needs a value\n"; std::exit(2); }
      return argv[++i];
    };
    if (a == "--kernel") kernel = val();
    else if (a == "--k") k = std::atof(val().c_str());
    else if (a == "--p") p = std::atoi(val().c_str());
    else if (a == "--ncrit") ncrit = std::atoi(val().c_str());
    else if (a == "--threads") threads = std::atoi(val().c_str());
    else if (a == "--sources") src_path = val();
    else if (a == "--targets") trg_path = val();
    else if (a == "--out") out_path = val();
    else if (a == "--repeat") repeat = std::max(1, std::atoi(val().c_str()));
    else if (a == "--cache") cache = val();
    else { std::cerr << "unknown argument " << a << "\n"; return 2; }
  }
  if (src_path.empty()) { std::cerr << "--sources is required\n"; return 2; }
  if (kernel != "laplace" && kernel != "yukawa") { std::cerr << "--kernel laplace|yukawa\n"; return 2; }
  omp_set_num_threads(threads);

  size_t ns, sc, nt = 0, tc = 0;
  std::vector<double> s = read_npy(src_path, ns, sc);
  if (sc < 4) { std::cerr << src_path << ": need columns x, y, z, q\n"; return 2; }
  Bodies<real_t> sources(ns);
  for (size_t i = 0; i < ns; ++i) {
    sources[i].ibody = int(i);
    for (int d = 0; d < 3; ++d) sources[i].X[d] = s[i * sc + d];
    sources[i].q = s[i * sc + 3];
  }
  Bodies<real_t> targets;
  if (trg_path.empty()) {
    nt = ns;
    targets.resize(nt);
    for (size_t i = 0; i < nt; ++i) { targets[i].ibody = int(i); targets[i].X = sources[i].X; }
  } else {
    std::vector<double> t = read_npy(trg_path, nt, tc);
    if (tc < 3) { std::cerr << trg_path << ": need columns x, y, z\n"; return 2; }
    targets.resize(nt);
    for (size_t i = 0; i < nt; ++i) {
      targets[i].ibody = int(i);
      for (int d = 0; d < 3; ++d) targets[i].X[d] = t[i * tc + d];
    }
  }

  std::ostringstream fname;
  fname << cache << "/exafmm_t_" << kernel << "_p" << p;
  if (kernel == "yukawa") fname << "_k" << k;
  fname << ".dat";
  std::remove(fname.str().c_str());  // run 1 computes the operators

  std::vector<double> out(4 * nt, 0.0);
  std::vector<Times> times;
  for (int r = 0; r < repeat; ++r) {
    std::vector<double>* o = (r == repeat - 1) ? &out : nullptr;
    if (kernel == "laplace") {
      LaplaceFmm fmm(p, ncrit, fname.str());
      times.push_back(run_once(fmm, sources, targets, o));
    } else {
      ModifiedHelmholtzFmm fmm(p, ncrit, real_t(k), fname.str());
      times.push_back(run_once(fmm, sources, targets, o));
    }
  }
  if (!out_path.empty()) write_npy(out_path, out, nt, 4);

  auto med = [&](double Times::*f) {
    std::vector<double> v;
    for (auto& t : times) v.push_back(t.*f);
    return median(v);
  };
  const Times& c = times[0];
  std::ostringstream totals;
  double best = times[0].total, best_eval = times[0].evaluation;
  for (size_t r = 0; r < times.size(); ++r) {
    totals << (r ? ", " : "") << times[r].total;
    best = std::min(best, times[r].total);
    best_eval = std::min(best_eval, times[r].evaluation);
  }
  std::printf("{\"kernel\": \"%s\", \"k\": %g, \"p\": %d, \"ncrit\": %d, \"threads\": %d, "
              "\"nsources\": %zu, \"ntargets\": %zu, \"targets_are_sources\": %s, \"repeat\": %d, "
              "\"depth\": %d, \"leafs\": %zu, \"real_bytes\": %zu, "
              "\"cold\": {\"tree\": %.6f, \"lists\": %.6f, \"precompute\": %.6f, \"m2l_setup\": %.6f, "
              "\"evaluation\": %.6f, \"total\": %.6f}, "
              "\"median\": {\"tree\": %.6f, \"lists\": %.6f, \"precompute\": %.6f, \"m2l_setup\": %.6f, "
              "\"evaluation\": %.6f, \"total\": %.6f}, "
              "\"min\": {\"evaluation\": %.6f, \"total\": %.6f}, \"totals\": [%s]}\n",
              kernel.c_str(), k, p, ncrit, threads, ns, nt, trg_path.empty() ? "true" : "false", repeat,
              c.depth, c.leafs, sizeof(real_t),
              c.tree, c.lists, c.precompute, c.m2l_setup, c.evaluation, c.total,
              med(&Times::tree), med(&Times::lists), med(&Times::precompute), med(&Times::m2l_setup),
              med(&Times::evaluation), med(&Times::total), best_eval, best, totals.str().c_str());
  return 0;
}

// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire-fr: reads every rank's flight-recorder dump and prints which rank
// is behind, at which sequence number, whom the others waited for, and
// whether ranks called different collectives (README "Reading a timeout
// report").
//
//   gradwire-fr [DIR | DUMP.json ...]     (default: $GRADWIRE_FR_DIR or /tmp/gradwire-fr)
//
// Exit status: 0 if the dumps were read (whatever they say), 2 otherwise.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "diag/fr_report.h"
#include "gradwire/error.h"

namespace {

std::vector<std::string> dumps_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("gradwire-fr-rank", 0) == 0 && n.size() > 5 && n.ends_with(".json"))
        out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    const char* d = std::getenv("GRADWIRE_FR_DIR");
    args.push_back(d && *d ? d : "/tmp/gradwire-fr");
  }
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") {
      std::printf("usage: gradwire-fr [DIR | DUMP.json ...]\n");
      return 0;
    }
    struct stat st {};
    if (stat(a.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      auto in = dumps_in(a);
      if (in.empty()) std::fprintf(stderr, "gradwire-fr: no gradwire-fr-rank*.json in %s\n", a.c_str());
      files.insert(files.end(), in.begin(), in.end());
    } else {
      files.push_back(a);
    }
  }
  std::vector<gradwire::fr::Dump> dumps;
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) {
      std::fprintf(stderr, "gradwire-fr: cannot read %s\n", f.c_str());
      return 2;
    }
    // Checked before reading: parse_dump refuses more anyway, but a huge
    // file should not be read into memory first.
    struct stat fst {};
    if (stat(f.c_str(), &fst) == 0 && size_t(fst.st_size) > gradwire::fr::kMaxDumpBytes) {
      std::fprintf(stderr, "gradwire-fr: %s is %lld bytes, more than a dump can be (%zu)\n",
                   f.c_str(), (long long)fst.st_size, gradwire::fr::kMaxDumpBytes);
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      dumps.push_back(gradwire::fr::parse_dump(ss.str(), f));
    } catch (const gradwire::Error& e) {
      std::fprintf(stderr, "gradwire-fr: %s\n", e.what());
      return 2;
    }
  }
  if (dumps.empty()) return 2;
  std::fputs(gradwire::fr::diagnose(dumps).text.c_str(), stdout);
  return 0;
}

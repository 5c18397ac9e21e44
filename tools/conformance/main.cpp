// kiln-conformance: runs the ONNX backend node tests (onnx/backend/test/data/node) on kiln's CPU reference
// backend. Each test directory holds model.onnx and test_data_set_*/{input,output}_*.pb; a test passes when
// every data set's outputs match the expected tensors (dtype, shape, values within tolerance). Each test
// runs in a fork()ed child with a timeout, so a crash or hang is recorded as that test's failure. Tests
// using ops outside the Foundation issue's op list are skipped. See tests/conformance/README.md.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "compare.h"
#include "kiln/debug.h"
#include "kiln/debug_values.h"
#include "kiln/kiln.h"
#include "onnx_scan.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace kiln::conformance {
namespace {

struct Options {
  std::string data_dir;
  std::string json_path;
  std::vector<std::string> xfail_paths;
  std::string scope_path;  // the exclusion list; empty: ops kiln does not implement are out of scope
  std::string filter;
  double min_pass_rate = 0.0;
  bool fail_on_unexpected = false;
  int jobs = 2;
  double timeout_s = 60.0;
  double rtol = 1e-3;  // float32 / float64
  double atol = 1e-5;
  bool verbose = false;
  std::string backend = debug::ReferenceBackendName();  // or cuda: each node test's graph runs on the CUDA layers
};

struct TestCase {
  std::string name;
  fs::path dir;
  std::string op;           // the per-op table row
  std::string skip_reason;  // non-empty: skipped
  bool expected_fail = false;
  std::string xfail_reason;
};

struct TestResult {
  std::string status = "skipped";  // passed | failed | xfail | xpass | skipped
  std::string message;
  double seconds = 0.0;
};

// ---------------------------------------------------------------- one test (runs in the child process)

// input_3.pb -> 3 (files sorted by their number, not by name: input_10 after input_9).
std::vector<fs::path> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<long, fs::path>> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) != 0 || e.path().extension() != ".pb") continue;
    found.emplace_back(std::strtol(f.c_str() + prefix.size(), nullptr, 10), e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [k, p] : found) out.push_back(p);
  return out;
}

// The node tests store bfloat16 data as uint16 tensors (numpy has no bfloat16): read them as bfloat16 bits
// where the model says bfloat16.
Tensor AsBFloat16IfStoredAsUInt16(Tensor t, DataType model_type) {
  if (model_type != DataType::kBFloat16 || t.dtype() != DataType::kUInt16) return t;
  Tensor b(DataType::kBFloat16, t.shape());
  if (t.nbytes()) std::memcpy(b.raw(), t.raw(), t.nbytes());
  return b;
}

// A sequence or optional output against the expected one: the same kind, length and tensors (CompareTensors each).
std::string CompareValues(const OnnxValue& got, const OnnxValue& want, const Options& o) {
  if (got.kind != want.kind) return "got " + got.Describe() + ", want " + want.Describe();
  if (got.is_tensor())
    return CompareTensors(got.tensor, AsBFloat16IfStoredAsUInt16(want.tensor, got.tensor.dtype()), o.rtol, o.atol);
  if (got.sequence.size() != want.sequence.size())
    return "got a sequence of " + std::to_string(got.sequence.size()) + " tensors, want " +
           std::to_string(want.sequence.size());
  for (size_t i = 0; i < got.sequence.size(); ++i) {
    const std::string diff = CompareTensors(
        got.sequence[i], AsBFloat16IfStoredAsUInt16(want.sequence[i], got.sequence[i].dtype()), o.rtol, o.atol);
    if (!diff.empty()) return "element " + std::to_string(i) + ": " + diff;
  }
  return "";
}

// How every test runs: on the chosen backend, float32 strictly (ONNX float32 is float32: TF32 matmuls miss the 1e-3
// tolerance, as AffineGrid's expansion showed).
debug::NetworkRunOptions RunOptions(const Options& o) {
  debug::NetworkRunOptions run;
  run.backend = o.backend;
  run.allow_tf32 = false;
  return run;
}

// RunTest for models whose inputs or outputs are sequences or optionals: each file is read as the type the graph
// gives it, the graph runs with debug::RunNetworkValues.
std::string RunValueTest(const NetworkDefinition& g, const std::vector<fs::path>& sets, const Options& o) {
  std::vector<NetworkTensor> graph_inputs;
  for (int k = 0; k < g.getNbInputs(); ++k) graph_inputs.push_back(g.getInput(k));
  for (const fs::path& set : sets) {
    const std::string where = sets.size() > 1 ? set.filename().string() + ": " : "";
    std::map<std::string, OnnxValue> inputs;
    const auto input_files = NumberedFiles(set, "input_");
    for (size_t k = 0; k < input_files.size(); ++k) {
      // By position among the graph's inputs (a sequence file's name is not read before its type is known).
      if (k >= graph_inputs.size())
        return where + input_files[k].filename().string() + " has no matching graph input (the graph has " +
               std::to_string(graph_inputs.size()) + ")";
      const NetworkTensor& in = graph_inputs[k];
      auto v = debug::ReadOnnxValueFile(input_files[k].string(), debug::NetworkValueType(g, in.name));
      if (!v.ok()) return where + "reading " + input_files[k].filename().string() + ": " + v.status().ToString();
      if (v->is_tensor()) v->tensor = AsBFloat16IfStoredAsUInt16(std::move(v->tensor), in.dtype);
      inputs[in.name] = std::move(*v);
    }
    auto outputs = debug::RunNetworkValues(g, inputs, RunOptions(o));
    if (!outputs.ok()) return where + "run: " + outputs.status().ToString();
    const auto output_files = NumberedFiles(set, "output_");
    if (output_files.size() > static_cast<size_t>(g.getNbOutputs()))
      return where + std::to_string(output_files.size()) + " expected outputs but the graph has " +
             std::to_string(g.getNbOutputs());
    for (size_t k = 0; k < output_files.size(); ++k) {
      const std::string oname = g.getOutputName(static_cast<int>(k));
      auto want = debug::ReadOnnxValueFile(output_files[k].string(), debug::NetworkValueType(g, oname));
      if (!want.ok())
        return where + "reading " + output_files[k].filename().string() + ": " + want.status().ToString();
      auto it = outputs->find(oname);
      if (it == outputs->end()) return where + "output " + std::to_string(k) + " '" + oname + "' was not produced";
      const std::string diff = CompareValues(it->second, *want, o);
      if (!diff.empty()) return where + "output " + std::to_string(k) + " '" + oname + "': " + diff;
    }
  }
  return "";
}

// Runs one test directory; returns "" on success, else the reason of the failure.
std::string RunTest(const fs::path& dir, const Options& o) {
  NetworkDefinition g;
  StderrLogger quiet(Severity::kInternalError);  // the import error is the test's message
  OnnxParser parser(g, quiet);
  const Status imported = parser.parseFromFile((dir / "model.onnx").string());
  if (!imported.ok()) return "import: " + imported.ToString();
  std::vector<NetworkTensor> graph_inputs;
  for (int k = 0; k < g.getNbInputs(); ++k) graph_inputs.push_back(g.getInput(k));
  bool values = false;  // a sequence or optional input or output
  for (int k = 0; k < g.getNbInputs(); ++k)
    values = values || debug::NetworkValueType(g, g.getInputName(k)) != debug::OnnxType::kTensor;
  for (int k = 0; k < g.getNbOutputs(); ++k)
    values = values || debug::NetworkValueType(g, g.getOutputName(k)) != debug::OnnxType::kTensor;

  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return "no test_data_set_* directory";
  if (values) return RunValueTest(g, sets, o);

  for (const fs::path& set : sets) {
    const std::string where = sets.size() > 1 ? set.filename().string() + ": " : "";
    std::map<std::string, Tensor> inputs;
    const auto input_files = NumberedFiles(set, "input_");
    for (size_t k = 0; k < input_files.size(); ++k) {
      std::string name;
      auto t = debug::ReadOnnxTensorFile(input_files[k].string(), &name);
      if (!t.ok())
        return where + "reading " + input_files[k].filename().string() + ": " + t.status().ToString();
      // By name when the file names a graph input, else by position among the graph's inputs.
      auto is_named = [&](const NetworkTensor& v) { return v.name == name; };
      const bool named = !name.empty() && std::any_of(graph_inputs.begin(), graph_inputs.end(), is_named);
      if (!named) {
        if (k >= graph_inputs.size())
          return where + input_files[k].filename().string() + " has no matching graph input (the graph has " +
                 std::to_string(graph_inputs.size()) + ")";
        name = graph_inputs[k].name;
      }
      const NetworkTensor& in = *std::find_if(graph_inputs.begin(), graph_inputs.end(), is_named);
      inputs[name] = AsBFloat16IfStoredAsUInt16(std::move(*t), in.dtype);
    }
    auto outputs = debug::RunNetwork(g, inputs, RunOptions(o));
    if (!outputs.ok()) return where + "run: " + outputs.status().ToString();
    const auto output_files = NumberedFiles(set, "output_");
    if (output_files.size() > static_cast<size_t>(g.getNbOutputs()))
      return where + std::to_string(output_files.size()) + " expected outputs but the graph has " +
             std::to_string(g.getNbOutputs());
    for (size_t k = 0; k < output_files.size(); ++k) {
      auto want = debug::ReadOnnxTensorFile(output_files[k].string());
      if (!want.ok())
        return where + "reading " + output_files[k].filename().string() + ": " + want.status().ToString();
      const std::string oname = g.getOutputName(static_cast<int>(k));
      auto it = outputs->find(oname);
      if (it == outputs->end())
        return where + "output " + std::to_string(k) + " '" + oname + "' was not produced";
      const Tensor expected = AsBFloat16IfStoredAsUInt16(std::move(*want), it->second.dtype());
      const std::string diff = CompareTensors(it->second, expected, o.rtol, o.atol);
      if (!diff.empty()) return where + "output " + std::to_string(k) + " '" + oname + "': " + diff;
    }
  }
  return "";
}

// ---------------------------------------------------------------- child processes (in the parent)

struct Running {
  pid_t pid = -1;
  int result_fd = -1;  // 'P' or 'F' + message, written by the child
  int log_fd = -1;     // the child's stdout+stderr (the last bytes are kept for crash reports)
  size_t index = 0;
  Clock::time_point start;
  std::string result, log;
  bool result_eof = false, log_eof = false;
};

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

bool Spawn(const TestCase& tc, size_t index, const Options& o, Running* r) {
  int res[2], log[2];
  if (pipe(res) != 0) return false;
  if (pipe(log) != 0) {
    close(res[0]);
    close(res[1]);
    return false;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(res[0]);
    close(res[1]);
    close(log[0]);
    close(log[1]);
    return false;
  }
  if (pid == 0) {  // child
    close(res[0]);
    close(log[0]);
    if (!o.verbose) {
      dup2(log[1], STDOUT_FILENO);
      dup2(log[1], STDERR_FILENO);
    }
    close(log[1]);
    std::string msg;
    try {
      msg = RunTest(tc.dir, o);
    } catch (const std::exception& e) {
      msg = std::string("exception: ") + e.what();
    } catch (...) {
      msg = "unknown exception";
    }
    WriteAll(res[1], (msg.empty() ? "P" : "F") + OneLine(msg, 4000));
    close(res[1]);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  }
  close(res[1]);
  close(log[1]);
  fcntl(res[0], F_SETFL, O_NONBLOCK);
  fcntl(log[0], F_SETFL, O_NONBLOCK);
  *r = Running{};
  r->pid = pid;
  r->result_fd = res[0];
  r->log_fd = log[0];
  r->index = index;
  r->start = Clock::now();
  return true;
}

// Reads what is available (keeping at most about `keep` trailing bytes); returns false at end of file.
bool Drain(int fd, std::string* into, size_t keep) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      into->append(buf, static_cast<size_t>(n));
      if (into->size() > 2 * keep) into->erase(0, into->size() - keep);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

std::string LastLogLine(const std::string& log) {
  std::string s = log;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  const size_t nl = s.rfind('\n');
  s = nl == std::string::npos ? s : s.substr(nl + 1);
  return s.empty() ? "" : " (last output: " + OneLine(s, 300) + ")";
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    default: return "signal";
  }
}

// Finishes a child whose result pipe closed (or that timed out) and returns its result.
TestResult Reap(Running& r, const fs::path& dir, bool timed_out, const Options& o) {
  TestResult out;
  if (timed_out) kill(r.pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(r.pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!r.log_eof) {
    const int fl = fcntl(r.log_fd, F_GETFL);
    fcntl(r.log_fd, F_SETFL, fl & ~O_NONBLOCK);  // the child is gone: read to the end
    Drain(r.log_fd, &r.log, 8192);
  }
  close(r.result_fd);
  close(r.log_fd);
  out.seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
  if (timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "timeout after %.0f s", o.timeout_s);
    out.status = "failed";
    out.message = buf;
  } else if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    out.status = "failed";
    out.message = "crashed: signal " + std::to_string(sig) + " (" + SignalName(sig) + ")" + LastLogLine(r.log);
  } else if (r.result.empty()) {
    out.status = "failed";
    out.message = "child exited with code " + std::to_string(WEXITSTATUS(wstatus)) + " without a result" +
                  LastLogLine(r.log);
  } else {
    out.status = r.result[0] == 'P' ? "passed" : "failed";
    out.message = r.result.substr(1);
  }
  // Paths inside the test directory are shown relative to it ("'model.onnx'").
  const std::string prefix = dir.string() + "/";
  for (size_t p; (p = out.message.find(prefix)) != std::string::npos;) out.message.erase(p, prefix.size());
  return out;
}

// Runs every in-scope test in up to o.jobs children; `on_done` sees each result as it arrives.
template <typename OnDone>
void RunAll(const std::vector<TestCase>& tests, const std::vector<size_t>& todo, const Options& o,
            std::vector<TestResult>* results, OnDone on_done) {
  std::vector<Running> running;
  size_t next = 0;
  const auto timeout = std::chrono::duration<double>(o.timeout_s);
  while (next < todo.size() || !running.empty()) {
    while (next < todo.size() && static_cast<int>(running.size()) < o.jobs) {
      Running r;
      const size_t idx = todo[next++];
      if (!Spawn(tests[idx], idx, o, &r)) {
        (*results)[idx] = TestResult{"failed", std::string("could not start a child: ") + std::strerror(errno), 0};
        on_done(idx);
        continue;
      }
      running.push_back(std::move(r));
    }
    if (running.empty()) continue;
    std::vector<pollfd> fds;
    auto now = Clock::now();
    double wait_ms = 1000;
    for (Running& r : running) {
      if (!r.result_eof) fds.push_back({r.result_fd, POLLIN, 0});
      if (!r.log_eof) fds.push_back({r.log_fd, POLLIN, 0});
      const double left = std::chrono::duration<double, std::milli>(r.start + timeout - now).count();
      wait_ms = std::min(wait_ms, std::max(0.0, left));
    }
    poll(fds.data(), fds.size(), static_cast<int>(wait_ms) + 1);
    now = Clock::now();
    for (size_t i = 0; i < running.size();) {
      Running& r = running[i];
      if (!r.result_eof) r.result_eof = !Drain(r.result_fd, &r.result, 1 << 16);
      if (!r.log_eof) r.log_eof = !Drain(r.log_fd, &r.log, 8192);
      const bool timed_out = !r.result_eof && now - r.start > timeout;
      if (r.result_eof || timed_out) {
        const size_t idx = r.index;
        (*results)[idx] = Reap(r, tests[idx].dir, timed_out, o);
        running.erase(running.begin() + static_cast<long>(i));
        on_done(idx);
      } else {
        ++i;
      }
    }
  }
}

// ---------------------------------------------------------------- expected failures, discovery

// Reads `test_name  # reason` lines from a file, or from every *.txt file of a directory.
bool LoadExpectedFailures(const std::string& path, std::map<std::string, std::string>* out,
                          std::map<std::string, std::string>* listed_in) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".txt") files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    std::fprintf(stderr, "warning: expected-failures path %s does not exist\n", path.c_str());
    return false;
  }
  for (const fs::path& f : files) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      std::string reason;
      const size_t hash = line.find('#');
      if (hash != std::string::npos) {
        reason = line.substr(hash + 1);
        line = line.substr(0, hash);
      }
      auto trim = [](std::string s) {
        const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
        return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
      };
      line = trim(line);
      if (line.empty()) continue;
      auto [it, fresh] = listed_in->emplace(line, f.filename().string());
      if (!fresh)
        std::fprintf(stderr, "warning: %s is listed as an expected failure in both %s and %s\n", line.c_str(),
                     it->second.c_str(), f.filename().string().c_str());
      (*out)[line] = trim(reason);
    }
  }
  return true;
}

// Reads the exclusion list: `entry  # reason` lines, where an entry is an op, "domain:Op" or "domain:*". An entry
// without a reason is an error (each exclusion must say why).
bool LoadExclusions(const std::string& path, Exclusions* out) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "error: cannot read the scope file %s\n", path.c_str());
    return false;
  }
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const size_t hash = line.find('#');
    std::string entry = line.substr(0, hash), reason = hash == std::string::npos ? "" : line.substr(hash + 1);
    auto trim = [](std::string s) {
      const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    entry = trim(entry);
    if (entry.empty()) continue;
    if (trim(reason).empty()) {
      std::fprintf(stderr, "error: %s:%d: '%s' has no reason (write `%s  # why it is out of scope`)\n", path.c_str(),
                   lineno, entry.c_str(), entry.c_str());
      return false;
    }
    out->entries.insert(entry);
  }
  out->loaded = true;
  return true;
}

// The node tests scripts/setup writes next to the build's bin/ (build/onnx-node-tests), else the data an onnx package
// up to 1.16 ships.
std::string DefaultDataDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path written = exe.parent_path().parent_path() / "onnx-node-tests";
    if (fs::is_directory(written, ec)) return written.string();
  }
  FILE* p = popen("python3 -c \"import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "
                  "'backend', 'test', 'data', 'node'))\" 2>/dev/null", "r");
  if (!p) return "";
  char buf[4096];
  std::string out;
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// Builds the test list: name, per-op row, scope. Expanded tests (test_x_expanded, test_x_expanded_ver18)
// are filed under "<op of test_x> (expanded)".
std::vector<TestCase> Discover(const Options& o, const std::map<std::string, std::string>& xfail,
                               const Exclusions& scope) {
  std::vector<TestCase> tests;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(o.data_dir))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  const std::regex re(o.filter.empty() ? ".*" : o.filter);
  for (const fs::path& d : dirs) {
    TestCase tc;
    tc.name = d.filename().string();
    if (!o.filter.empty() && !std::regex_search(tc.name, re)) continue;
    tc.dir = d;
    const ScannedModel m = ScanModelFile((d / "model.onnx").string());
    if (!m.ok) {
      tc.op = "(unreadable)";  // not skipped: the run reports the importer's error as a failure
    } else {
      tc.op = MainOp(m);
      const size_t ex = tc.name.find("_expanded");
      if (ex != std::string::npos) {
        const ScannedModel base = ScanModelFile((d.parent_path() / tc.name.substr(0, ex) / "model.onnx").string());
        tc.op = (base.ok ? MainOp(base) : tc.name.substr(5, ex - 5)) + " (expanded)";
      }
      const auto bad = OutOfScopeOps(m, scope);
      if (!bad.empty()) {
        tc.skip_reason = "out of scope:";  // "out of scope: If, Loop"
        for (size_t k = 0; k < bad.size(); ++k) tc.skip_reason += (k ? ", " : " ") + bad[k];
      }
    }
    auto it = xfail.find(tc.name);
    if (it != xfail.end()) {
      tc.expected_fail = true;
      tc.xfail_reason = it->second;
    }
    tests.push_back(std::move(tc));
  }
  return tests;
}

// ---------------------------------------------------------------- report

struct OpCounts {
  int passed = 0, failed = 0, xfail = 0, skipped = 0;
};

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"kiln-conformance: runs the ONNX backend node tests on kiln's CPU reference backend"};
  app.add_option("--data", o.data_dir, "node test directory (default: build/onnx-node-tests, which scripts/setup writes, "
                 "else the onnx Python package's backend/test/data/node)");
  app.add_option("--json", o.json_path, "write the results as JSON to this file")->required();
  app.add_option("--expected-failures", o.xfail_paths, "file or directory of *.txt files: `test_name  # reason` lines (repeatable)");
  app.add_option("--scope", o.scope_path, "exclusion list (`op  # reason`, `domain:*  # reason`): every other test is in scope, "
                 "whether or not kiln implements its ops");
  app.add_option("--filter", o.filter, "run only tests whose directory name matches this regex (std::regex_search)");
  app.add_option("--min-pass-rate", o.min_pass_rate, "exit 1 when the in-scope pass rate is below this (0..1)");
  app.add_flag("--fail-on-unexpected", o.fail_on_unexpected,
               "exit 1 when a test fails that the expected-failure list does not name (a regression)");
  app.add_option("-j,--jobs", o.jobs, "tests run in parallel (child processes)")->check(CLI::Range(1, 256));
  app.add_option("--timeout", o.timeout_s, "seconds per test before its child is killed")->check(CLI::PositiveNumber);
  app.add_option("--rtol", o.rtol, "relative tolerance for float32/float64 outputs");
  app.add_option("--atol", o.atol, "absolute tolerance for float32/float64 outputs");
  app.add_flag("-v,--verbose", o.verbose, "print every test, and let children print to the terminal");
  app.add_option("--backend", o.backend, "cpu (reference kernels) or cuda (the GPU layers, node by node)")
      ->check(CLI::IsMember(GetBackendNames()));
  CLI11_PARSE(app, argc, argv);

  if (o.data_dir.empty()) o.data_dir = DefaultDataDir();
  std::error_code ec;
  if (o.data_dir.empty() || !fs::is_directory(o.data_dir, ec)) {
    std::fprintf(stderr, "error: node test data directory %s not found (pass --data DIR or install the onnx Python package)\n",
                 o.data_dir.empty() ? "(onnx package not found)" : o.data_dir.c_str());
    return 1;
  }
  try {
    std::regex check(o.filter);
  } catch (const std::regex_error& e) {
    std::fprintf(stderr, "error: bad --filter regex '%s': %s\n", o.filter.c_str(), e.what());
    return 2;
  }
  std::map<std::string, std::string> xfail;
  std::map<std::string, std::string> listed_in;  // test -> file, to report duplicates
  for (const auto& p : o.xfail_paths) LoadExpectedFailures(p, &xfail, &listed_in);

  Exclusions scope;
  if (!o.scope_path.empty() && !LoadExclusions(o.scope_path, &scope)) return 2;
  std::vector<TestCase> tests = Discover(o, xfail, scope);
  std::vector<TestResult> results(tests.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < tests.size(); ++i) {
    if (tests[i].skip_reason.empty()) todo.push_back(i);
    else results[i] = TestResult{"skipped", tests[i].skip_reason, 0};
  }
  if (o.filter.empty()) {
    std::set<std::string> names;
    for (const auto& t : tests) names.insert(t.name);
    for (const auto& [n, r] : xfail)
      if (!names.count(n)) std::fprintf(stderr, "warning: expected failure '%s' names no test directory\n", n.c_str());
  }
  std::printf("kiln-conformance: %zu tests in %s (%zu in scope), %d jobs\n", tests.size(), o.data_dir.c_str(),
              todo.size(), o.jobs);

  signal(SIGPIPE, SIG_IGN);
  size_t done = 0;
  const auto t0 = Clock::now();
  RunAll(tests, todo, o, &results, [&](size_t idx) {
    ++done;
    TestCase& tc = tests[idx];
    TestResult& r = results[idx];
    if (tc.expected_fail) {
      if (r.status == "failed") r.status = "xfail";
      else if (r.status == "passed") r.status = "xpass";
    }
    const bool unexpected = r.status == "failed";
    if (o.verbose || unexpected) {
      std::printf("[%zu/%zu] %-60s %s%s%s (%.2f s)\n", done, todo.size(), tc.name.c_str(),
                  r.status == "failed" ? "FAILED" : r.status.c_str(), r.message.empty() ? "" : ": ",
                  OneLine(r.message, 300).c_str(), r.seconds);
      std::fflush(stdout);
    }
  });
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();

  // Tallies.
  std::map<std::string, OpCounts> per_op;
  int passed = 0, failed = 0, xfails = 0, xpasses = 0, skipped = 0;
  std::vector<size_t> unexpected, xpassed;
  for (size_t i = 0; i < tests.size(); ++i) {
    const std::string& s = results[i].status;
    OpCounts& c = per_op[tests[i].op];
    if (s == "passed" || s == "xpass") {
      ++passed, ++c.passed;
      if (s == "xpass") ++xpasses, xpassed.push_back(i);
    } else if (s == "failed" || s == "xfail") {
      ++failed, ++c.failed;
      if (s == "xfail") ++xfails, ++c.xfail;
      else unexpected.push_back(i);
    } else {
      ++skipped, ++c.skipped;
    }
  }
  const int in_scope = passed + failed;
  const double rate = in_scope ? static_cast<double>(passed) / in_scope : 1.0;

  // Per-op table: ops with in-scope tests; skipped-only ops on one line.
  std::printf("\n%-44s %6s %6s %6s %6s\n", "op", "pass", "fail", "xfail", "skip");
  std::string skipped_only;
  for (const auto& [op, c] : per_op) {
    if (c.passed + c.failed == 0) {
      skipped_only += " " + op + "(" + std::to_string(c.skipped) + ")";
      continue;
    }
    std::printf("%-44s %6d %6d %6d %6d%s\n", op.c_str(), c.passed, c.failed, c.xfail, c.skipped,
                c.failed > c.xfail ? "  <-- unexpected failures" : "");
  }
  if (!skipped_only.empty()) std::printf("\nskipped (out of scope), by main op:%s\n", OneLine(skipped_only, 1u << 20).c_str());

  if (!xpassed.empty()) {
    std::printf("\nlisted as expected failures but passed (remove them from the list):\n");
    for (size_t i : xpassed) std::printf("  %s  # %s\n", tests[i].name.c_str(), tests[i].xfail_reason.c_str());
  }
  if (!unexpected.empty()) {
    std::printf("\nunexpected failures (%zu):\n", unexpected.size());
    for (size_t i : unexpected)
      std::printf("  %-56s %s\n", tests[i].name.c_str(), OneLine(results[i].message, 400).c_str());
  }
  std::printf("\ntotal %zu tests: %d passed (%d listed as expected failures), %d failed (%d expected, %zu unexpected), "
              "%d skipped; in-scope pass rate %.1f%% (%d/%d); %.1f s\n",
              tests.size(), passed, xpasses, failed, xfails, unexpected.size(), skipped, 100.0 * rate, passed,
              in_scope, wall);

  // JSON.
  nlohmann::json j;
  j["data_dir"] = o.data_dir;
  j["total"] = tests.size();
  j["passed"] = passed;
  j["failed"] = failed;
  j["unexpected_failures"] = unexpected.size();
  j["expected_failures"] = xfails;
  j["xpass"] = xpasses;
  j["skipped"] = skipped;
  j["in_scope_total"] = in_scope;
  j["in_scope_passed"] = passed;
  j["pass_rate"] = rate;
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                     DataType::kFloat8E4M3FN}) {
    const Tolerance tol = ToleranceFor(t, o.rtol, o.atol);
    j["tolerance"][DataTypeName(t)] = {{"rtol", tol.rtol}, {"atol", tol.atol}};
  }
  j["per_op"] = nlohmann::json::object();
  for (const auto& [op, c] : per_op)
    j["per_op"][op] = {{"passed", c.passed}, {"failed", c.failed}, {"xfail", c.xfail}, {"skipped", c.skipped}};
  j["tests"] = nlohmann::json::array();
  for (size_t i = 0; i < tests.size(); ++i)
    j["tests"].push_back({{"name", tests[i].name}, {"op", tests[i].op}, {"status", results[i].status},
                          {"message", results[i].message}, {"seconds", results[i].seconds}});
  std::ofstream jf(o.json_path);
  jf << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!jf) std::fprintf(stderr, "error: cannot write %s\n", o.json_path.c_str());

  int rc = 0;
  if (rate < o.min_pass_rate) {
    std::printf("in-scope pass rate %.1f%% is below the required %.1f%%\n", 100.0 * rate, 100.0 * o.min_pass_rate);
    rc = 1;
  }
  if (o.fail_on_unexpected && !unexpected.empty()) {
    std::printf("%zu unexpected failure(s): a regression, or a test to add to the expected-failure list with its "
                "reason\n", unexpected.size());
    rc = 1;
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return rc;
}

}  // namespace
}  // namespace kiln::conformance

int main(int argc, char** argv) { return kiln::conformance::Main(argc, argv); }

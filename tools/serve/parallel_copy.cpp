// Host memory copies over a few threads (parallel_copy.h).
#include "parallel_copy.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace kiln::serve {

namespace {

constexpr size_t kMinChunk = size_t{1} << 20;
constexpr size_t kMaxThreads = 8;  // the caller and 7 of the pool's

// One ParallelCopy call: its chunks, taken one at a time by whichever thread is free.
struct Job {
  std::vector<CopyPiece> chunks;
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  std::condition_variable finished;

  void Work() {
    size_t copied = 0;
    for (size_t i = next.fetch_add(1); i < chunks.size(); i = next.fetch_add(1)) {
      std::memcpy(chunks[i].dst, chunks[i].src, chunks[i].bytes);
      ++copied;
    }
    if (copied > 0 && done.fetch_add(copied) + copied == chunks.size()) {
      std::lock_guard<std::mutex> lock(mu);
      finished.notify_all();
    }
  }
};

class Pool {
 public:
  static Pool& Get() {
    static Pool pool;
    return pool;
  }

  size_t threads() const { return workers_.size(); }

  // Hands the job to `helpers` of the pool's threads, works on it too, and waits until every chunk is copied.
  void Run(const std::shared_ptr<Job>& job, size_t helpers) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < helpers; ++i) queue_.push_back(job);
    }
    if (helpers == 1)
      wake_.notify_one();
    else
      wake_.notify_all();
    job->Work();
    std::unique_lock<std::mutex> lock(job->mu);
    job->finished.wait(lock, [&] { return job->done.load() == job->chunks.size(); });
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

 private:
  Pool() {
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    const size_t n = std::min(kMaxThreads, cores) - 1;
    for (size_t i = 0; i < n; ++i) workers_.emplace_back([this] { Loop(); });
  }

  void Loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job->Work();  // (nothing left to take when it comes late: the caller and the others took every chunk)
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

void ParallelCopy(const std::vector<CopyPiece>& pieces) {
  size_t total = 0;
  for (const CopyPiece& p : pieces) total += p.bytes;
  Pool& pool = Pool::Get();
  const size_t threads = std::min({kMaxThreads, pool.threads() + 1, total / kMinChunk});
  if (threads < 2) {
    for (const CopyPiece& p : pieces)
      if (p.bytes > 0) std::memcpy(p.dst, p.src, p.bytes);
    return;
  }
  // About two chunks per thread (so one slow thread does not hold the rest up), none under kMinChunk; pieces smaller
  // than a chunk are chunks of their own.
  const size_t chunk = std::max(kMinChunk, (total + 2 * threads - 1) / (2 * threads));
  auto job = std::make_shared<Job>();
  for (const CopyPiece& p : pieces) {
    for (size_t at = 0; at < p.bytes; at += chunk) {
      const size_t n = std::min(chunk, p.bytes - at);
      job->chunks.push_back({static_cast<char*>(p.dst) + at, static_cast<const char*>(p.src) + at, n});
    }
  }
  if (job->chunks.empty()) return;
  pool.Run(job, std::min(threads, job->chunks.size()) - 1);
}

}  // namespace kiln::serve

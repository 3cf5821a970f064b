// Runs jobs on worker threads and hands their results back in the order the jobs were
// submitted, with a bounded number in flight: the producer blocks (consuming finished
// results in order) rather than running ahead, so memory stays bounded however long the
// input. With one worker, jobs run inline on the caller's thread. `data prepare` encodes
// documents with it: the output is byte-identical for any number of workers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

template <class Result>
class OrderedPool {
 public:
  // consume(result) runs on the submitting thread, once per job, in submission order.
  OrderedPool(int workers, size_t max_in_flight, std::function<void(Result&)> consume)
      : max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight), consume_(std::move(consume)) {
    if (workers > 1)
      for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }

  ~OrderedPool() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      queue_.clear();  // jobs not started are dropped: we are unwinding from an error
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  OrderedPool(const OrderedPool&) = delete;
  OrderedPool& operator=(const OrderedPool&) = delete;

  // Queues a job; first consumes the oldest result while max_in_flight jobs are pending.
  // An exception a job threw is rethrown here or by finish(), when its result's turn comes.
  void submit(std::function<Result()> job) {
    if (threads_.empty()) {
      try {
        Result result = job();
        consume_(result);
      } catch (...) {
        failed_ = true;
        throw;
      }
      return;
    }
    while (in_flight_.size() >= max_in_flight_) consume_oldest();
    std::packaged_task<Result()> task(std::move(job));
    in_flight_.push_back(task.get_future());
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

  // Consumes every remaining result, in order. Does nothing once a job or consume has
  // thrown: that first error is the one to report, not a later job's.
  void finish() {
    while (!failed_ && !in_flight_.empty()) consume_oldest();
  }

 private:
  void consume_oldest() {
    std::future<Result> oldest = std::move(in_flight_.front());
    in_flight_.pop_front();
    try {
      Result result = oldest.get();
      consume_(result);
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

  void work() {
    while (true) {
      std::packaged_task<Result()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();  // the future holds the result or the exception
    }
  }

  size_t max_in_flight_;
  std::function<void(Result&)> consume_;
  std::vector<std::thread> threads_;
  std::deque<std::future<Result>> in_flight_;  // touched by the submitting thread only
  bool failed_ = false;                        // likewise
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<Result()>> queue_;
  bool stopping_ = false;
};

}  // namespace kiln

// The software CUDA device's streams, events and graphs: work is queued in stream order and
// runs only when the host waits for it (a stream, event or context synchronisation), so a
// result read before its wait is never there yet, as on a GPU that is still busy.
//
// When the host waits, queued work runs on the waiting thread in an order that honours only
// what CUDA promises: each stream's order, cuStreamWaitEvent, and the legacy default stream's
// implicit ordering with blocking streams. Among the streams with runnable work, the most
// recently created goes first, so a dependency that code forgot to state shows up as a wrong
// result here rather than working by luck.
//
// Stream capture (cuStreamBeginCapture ... cuStreamEndCapture) records a stream's work into a
// graph instead of queueing it; a graph, once instantiated, is queued whole by a launch. The
// calls capture forbids (a synchronisation, an allocation or free, the legacy stream's
// implicit ordering with a capturing stream) fail with the driver's error and invalidate the
// capture, so that cuStreamEndCapture then fails too.
//
// Not thread-safe: the driver holds its lock around every call (software_driver.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

namespace tinymlir {
namespace gpu {
namespace software {

// What a piece of work adds to the device's counters each time it is queued.
struct WorkCounts {
  uint64_t kernels = 0;
  uint64_t bytes_to_device = 0;
  uint64_t bytes_from_device = 0;
};

// One operation: what it does (returning a CUresult, 0 for success) and what it counts.
struct Task {
  std::function<int()> run;
  WorkCounts counts;
};

// The driver's error codes this file returns (cuda.h's values).
inline constexpr int kErrorInvalidValue = 1;
inline constexpr int kErrorInvalidHandle = 400;
inline constexpr int kErrorIllegalState = 401;
inline constexpr int kErrorCaptureUnsupported = 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
inline constexpr int kErrorCaptureInvalidated = 901;  // ..._INVALIDATED
inline constexpr int kErrorCaptureIsolation = 905;    // ..._ISOLATION
inline constexpr int kErrorCaptureImplicit = 906;     // ..._IMPLICIT

// cuStreamBeginCapture's modes (CUstreamCaptureMode).
inline constexpr int kCaptureModeGlobal = 0, kCaptureModeThreadLocal = 1, kCaptureModeRelaxed = 2;

struct Graph {
  std::vector<Task> tasks;  // in capture order
};

class DeviceQueue {
 public:
  using StreamId = uint64_t;  // 0: the legacy default stream
  using EventId = uint64_t;
  static constexpr StreamId kLegacyStream = 0;

  DeviceQueue();

  StreamId CreateStream(bool blocking);
  bool HasStream(StreamId stream) const;
  // Runs the stream's work, then forgets it; 0 or the first error of that work.
  int DestroyStream(StreamId stream);

  EventId CreateEvent();
  bool HasEvent(EventId event) const;
  void DestroyEvent(EventId event);

  // Queues `task` on `stream` (or records it, when the stream is being captured). Fails when
  // the legacy stream is used while a blocking stream is captured.
  int Enqueue(StreamId stream, Task task);
  int RecordEvent(EventId event, StreamId stream);
  int WaitEvent(StreamId stream, EventId event);

  // Host waits: run what they wait for; 0 or the first error met (which is sticky: the
  // device then refuses all work until Reset, as a CUDA context does after a fault).
  int SynchronizeStream(StreamId stream);
  int SynchronizeEvent(EventId event);
  int SynchronizeAll();

  int BeginCapture(StreamId stream, int mode);
  // The captured graph (the caller owns it), or the error that invalidated the capture.
  int EndCapture(StreamId stream, std::unique_ptr<Graph> *graph);
  bool IsCapturing(StreamId stream) const;
  // Fails a call that capture forbids when a capture that forbids it is under way (one in
  // global mode, or in thread-local mode begun on this thread), invalidating the capture.
  int CheckNotCapturing();

  // The sticky error (0 if none), and a reset that clears it and drops all work.
  int sticky_error() const { return sticky_error_; }
  void Reset();

  // Set by the driver: opens device memory around running work.
  std::function<void(const std::function<void()> &)> with_device_memory_open;

 private:
  struct Capture {
    std::unique_ptr<Graph> graph = std::make_unique<Graph>();
    int mode = kCaptureModeGlobal;
    std::thread::id thread;
    int invalidated_by = 0;
  };
  struct Prerequisite {
    StreamId stream;
    uint64_t ticket;  // done when the stream has completed this many tasks
  };
  struct Queued {
    Task task;
    std::vector<Prerequisite> after;
  };
  struct Stream {
    bool blocking = false;
    std::deque<Queued> pending;
    uint64_t enqueued = 0, completed = 0;
    std::unique_ptr<Capture> capture;
  };
  struct Event {
    StreamId stream = kLegacyStream;
    uint64_t ticket = 0;  // 0: never recorded, or recorded with nothing before it
    const Capture *captured_in = nullptr;
  };

  bool Done(const Prerequisite &p) const;
  bool Runnable(const Stream &s) const;
  // Runs runnable work until `satisfied` holds or an error occurs.
  int RunUntil(const std::function<bool()> &satisfied);
  void Invalidate(Capture *capture, int error);

  std::map<StreamId, Stream> streams_;
  std::map<EventId, Event> events_;
  StreamId next_stream_ = 1;
  EventId next_event_ = 1;
  int sticky_error_ = 0;
};

}  // namespace software
}  // namespace gpu
}  // namespace tinymlir

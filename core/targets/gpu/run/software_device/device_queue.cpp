#include "core/targets/gpu/run/software_device/device_queue.h"

#include <utility>

namespace tinymlir {
namespace gpu {
namespace software {

DeviceQueue::DeviceQueue() { streams_[kLegacyStream].blocking = true; }

DeviceQueue::StreamId DeviceQueue::CreateStream(bool blocking) {
  const StreamId id = next_stream_++;
  streams_[id].blocking = blocking;
  return id;
}

bool DeviceQueue::HasStream(StreamId stream) const { return streams_.count(stream) != 0; }

int DeviceQueue::DestroyStream(StreamId stream) {
  // Work queued before the destroy still completes (the driver does not wait for it, but
  // running it now is one of the orders it could have run in).
  const int rc = SynchronizeStream(stream);
  Stream &s = streams_.at(stream);
  if (s.capture) Invalidate(s.capture.get(), kErrorCaptureInvalidated);
  // Other streams' prerequisites on this one are met (Done treats a missing stream so).
  streams_.erase(stream);
  return rc;
}

DeviceQueue::EventId DeviceQueue::CreateEvent() {
  const EventId id = next_event_++;
  events_[id];
  return id;
}

bool DeviceQueue::HasEvent(EventId event) const { return events_.count(event) != 0; }

void DeviceQueue::DestroyEvent(EventId event) { events_.erase(event); }

void DeviceQueue::Invalidate(Capture *capture, int error) {
  if (!capture->invalidated_by) capture->invalidated_by = error;
}

int DeviceQueue::CheckNotCapturing() {
  int rc = 0;
  for (auto &[id, s] : streams_) {
    if (!s.capture) continue;
    const Capture &c = *s.capture;
    const bool forbids = c.mode == kCaptureModeGlobal ||
                         (c.mode == kCaptureModeThreadLocal && c.thread == std::this_thread::get_id());
    if (!forbids) continue;
    Invalidate(s.capture.get(), kErrorCaptureUnsupported);
    rc = kErrorCaptureUnsupported;
  }
  return rc;
}

int DeviceQueue::Enqueue(StreamId stream, Task task) {
  if (sticky_error_) return sticky_error_;
  Stream &s = streams_.at(stream);
  if (s.capture) {
    s.capture->graph->tasks.push_back(std::move(task));
    return 0;
  }
  Queued queued{std::move(task), {}};
  // The legacy stream and blocking streams wait for each other's earlier work.
  if (stream == kLegacyStream) {
    for (auto &[id, other] : streams_) {
      if (id == kLegacyStream || !other.blocking) continue;
      if (other.capture) {
        Invalidate(other.capture.get(), kErrorCaptureImplicit);
        return kErrorCaptureImplicit;
      }
      queued.after.push_back({id, other.enqueued});
    }
  } else if (s.blocking) {
    queued.after.push_back({kLegacyStream, streams_.at(kLegacyStream).enqueued});
  }
  s.pending.push_back(std::move(queued));
  ++s.enqueued;
  return 0;
}

int DeviceQueue::RecordEvent(EventId event, StreamId stream) {
  if (sticky_error_) return sticky_error_;
  Event &e = events_.at(event);
  const Stream &s = streams_.at(stream);
  if (stream == kLegacyStream) {
    // Recording on the legacy stream orders after blocking streams' work, as any legacy work.
    const int rc = Enqueue(stream, Task{[] { return 0; }, {}});
    if (rc) return rc;
  }
  e.stream = stream;
  e.ticket = s.enqueued;
  e.captured_in = s.capture.get();
  return 0;
}

int DeviceQueue::WaitEvent(StreamId stream, EventId event) {
  if (sticky_error_) return sticky_error_;
  const Event &e = events_.at(event);
  Stream &s = streams_.at(stream);
  if (s.capture) {
    // Inside a capture only the capture's own events order anything (one stream: in order).
    if (e.captured_in == s.capture.get()) return 0;
    Invalidate(s.capture.get(), kErrorCaptureIsolation);
    return kErrorCaptureIsolation;
  }
  if (e.captured_in) {
    // Joining a capture from another stream is not supported by this device.
    for (auto &[id, other] : streams_)
      if (other.capture.get() == e.captured_in) Invalidate(other.capture.get(),
                                                            kErrorCaptureUnsupported);
    return kErrorCaptureUnsupported;
  }
  Queued queued{Task{[] { return 0; }, {}}, {{e.stream, e.ticket}}};
  if (stream == kLegacyStream || s.blocking) {
    const int rc = Enqueue(stream, std::move(queued.task));
    if (rc) return rc;
    s.pending.back().after.push_back({e.stream, e.ticket});
    return 0;
  }
  s.pending.push_back(std::move(queued));
  ++s.enqueued;
  return 0;
}

bool DeviceQueue::Done(const Prerequisite &p) const {
  auto it = streams_.find(p.stream);
  return it == streams_.end() || it->second.completed >= p.ticket;
}

bool DeviceQueue::Runnable(const Stream &s) const {
  if (s.pending.empty()) return false;
  for (const Prerequisite &p : s.pending.front().after)
    if (!Done(p)) return false;
  return true;
}

int DeviceQueue::RunUntil(const std::function<bool()> &satisfied) {
  if (sticky_error_) return sticky_error_;
  if (satisfied()) return 0;
  int rc = 0;
  const auto run = [&] {
    while (!satisfied()) {
      // The most recently created stream with runnable work goes first.
      Stream *next = nullptr;
      for (auto it = streams_.rbegin(); it != streams_.rend(); ++it)
        if (Runnable(it->second)) {
          next = &it->second;
          break;
        }
      if (!next) return;  // cannot happen: prerequisites name earlier work only
      Queued queued = std::move(next->pending.front());
      next->pending.pop_front();
      rc = queued.task.run();
      ++next->completed;
      if (rc) return;
    }
  };
  if (with_device_memory_open)
    with_device_memory_open(run);
  else
    run();
  if (rc) {
    sticky_error_ = rc;
    for (auto &[id, s] : streams_) {
      s.completed += s.pending.size();
      s.pending.clear();
    }
  }
  return rc;
}

int DeviceQueue::SynchronizeStream(StreamId stream) {
  const Stream *s = &streams_.at(stream);
  const uint64_t ticket = s->enqueued;
  return RunUntil([this, stream, ticket] { return streams_.at(stream).completed >= ticket; });
}

int DeviceQueue::SynchronizeEvent(EventId event) {
  const Event e = events_.at(event);
  if (e.captured_in) return kErrorCaptureUnsupported;
  return RunUntil([this, e] { return Done({e.stream, e.ticket}); });
}

int DeviceQueue::SynchronizeAll() {
  return RunUntil([this] {
    for (const auto &[id, s] : streams_)
      if (!s.pending.empty()) return false;
    return true;
  });
}

int DeviceQueue::BeginCapture(StreamId stream, int mode) {
  if (sticky_error_) return sticky_error_;
  if (stream == kLegacyStream) return kErrorCaptureUnsupported;
  if (mode < kCaptureModeGlobal || mode > kCaptureModeRelaxed) return kErrorInvalidValue;
  Stream &s = streams_.at(stream);
  if (s.capture) return kErrorIllegalState;
  s.capture = std::make_unique<Capture>();
  s.capture->mode = mode;
  s.capture->thread = std::this_thread::get_id();
  return 0;
}

int DeviceQueue::EndCapture(StreamId stream, std::unique_ptr<Graph> *graph) {
  graph->reset();
  Stream &s = streams_.at(stream);
  if (!s.capture) return kErrorIllegalState;
  std::unique_ptr<Capture> capture = std::move(s.capture);
  for (auto &[id, e] : events_)
    if (e.captured_in == capture.get()) e = Event{};
  if (capture->invalidated_by) return kErrorCaptureInvalidated;
  *graph = std::move(capture->graph);
  return 0;
}

bool DeviceQueue::IsCapturing(StreamId stream) const {
  return streams_.at(stream).capture != nullptr;
}

void DeviceQueue::Reset() {
  streams_.clear();
  events_.clear();
  streams_[kLegacyStream].blocking = true;
  sticky_error_ = 0;
}

}  // namespace software
}  // namespace gpu
}  // namespace tinymlir

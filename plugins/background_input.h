// nnbackground's second input (mode=video): the "background" sink pad, a request pad made
// only when asked for by name (never a target of automatic linking). It keeps the
// newest background frame for the main stream to take; the main stream never waits for
// it (a mutex held for a pointer swap is all they share).
//
// Pacing: a non-live background source would otherwise decode as fast as the CPU allows
// (nothing downstream of this pad syncs to the clock). So the background's streaming
// thread waits until the main stream has reached the running time of the frame it brings
// (measured from an anchor taken at the first frame, so the two timelines need not start
// together, and re-taken after a flush), but never longer than kMaxWait of real time: a
// stalled or ended main stream, or both branches sharing one thread (a tee without a
// queue), cannot deadlock it. After the main stream's EOS the pad returns EOS.
//
// The last frame stays after the background's EOS, across flushes and caps changes; it is
// dropped when the element goes to READY.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

namespace nn::plugins {

class BackgroundInput {
 public:
  // Longest the background thread waits for the main stream per frame (real time).
  static constexpr gint64 kMaxWaitUs = 200 * 1000;

  explicit BackgroundInput(GstElement* element);
  // Makes the pad from `templ` and adds it to the element; null when there is one already.
  GstPad* add_pad(GstPadTemplate* templ);
  // Deactivates the pad made by add_pad and removes it from the element.
  void remove_pad(GstPad* pad);
  ~BackgroundInput();
  BackgroundInput(const BackgroundInput&) = delete;
  BackgroundInput& operator=(const BackgroundInput&) = delete;

  // Main stream side. Notes the main stream's running time (wakes a waiting background
  // thread) and, when `take` is set, returns the newest background frame (a new ref, or
  // nullptr when none arrived yet) with its video info.
  GstBuffer* on_main_frame(GstClockTime running_time, bool take, GstVideoInfo* info);
  void on_main_flush();  // FLUSH_STOP on the main stream: time restarts, re-anchor
  void on_main_eos();    // the main stream ended: stop pacing, refuse further frames
  void on_main_start();  // the main stream (re)starts
  // After the pads are deactivated (PAUSED -> READY): forget the frame.
  void clear();

  guint64 frames_received() const;

 private:
  static GstFlowReturn chain(GstPad* pad, GstObject* parent, GstBuffer* buffer);
  static gboolean event(GstPad* pad, GstObject* parent, GstEvent* event);
  static gboolean query(GstPad* pad, GstObject* parent, GstQuery* query);
  static gboolean activate_mode(GstPad* pad, GstObject* parent, GstPadMode mode, gboolean active);
  GstFlowReturn push_frame(GstBuffer* buffer);
  bool set_caps(GstCaps* caps);

  GstElement* element_;  // not owned (it owns us)
  GstPad* pad_ = nullptr;  // owned by the element; null until requested

  // Everything below under lock_.
  mutable GMutex lock_;
  GCond cond_;
  GstBuffer* newest_ = nullptr;
  GstVideoInfo newest_info_;
  GstVideoInfo caps_info_;  // of the current caps, for the frames that follow
  bool caps_valid_ = false;
  GstSegment segment_;
  GstClockTime main_time_ = GST_CLOCK_TIME_NONE;
  bool anchored_ = false;
  GstClockTimeDiff offset_ = 0;  // background running time - main running time at the anchor
  bool flushing_ = true;
  bool main_eos_ = false;
  bool eos_ = false;
  guint64 received_ = 0;
};

}  // namespace nn::plugins

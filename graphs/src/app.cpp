// App: a built graph, played with a bus thread that turns messages into callbacks.
#include "nn/graph/app.h"

#include <gst/gst.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "builder.h"
#include "element_stats.h"  // the stats field names nnsegment reports

#ifndef NN_GST_PLUGIN_DIR
#define NN_GST_PLUGIN_DIR ""
#endif

namespace nn::graph {
namespace {

std::atomic<int> g_interrupts{0};

extern "C" void on_interrupt_signal(int) {
  g_interrupts.fetch_add(1);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// GStreamer's flow errors say what, not what to do about it.
std::string hint_for(const char* debug) {
  if (debug && std::strstr(debug, "not-negotiated"))
    return "\nhint: two linked nodes agree on no format. Put a videoconvert before elements with fixed "
           "formats "
           "(sinks, encoders, nnbackground); `nngraph dot GRAPH --negotiate -o g.png` shows what each pad "
           "takes.";
  if (debug && std::strstr(debug, "not-linked"))
    return "\nhint: a stream reached an unlinked pad (a decodebin output of a type nothing takes?).";
  return {};
}

struct SinkCounter {
  std::string node;
  std::atomic<uint64_t> buffers{0};
};

GstPadProbeReturn count_buffer(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* c = static_cast<SinkCounter*>(data);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) c->buffers.fetch_add(1);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER_LIST)
    c->buffers.fetch_add(gst_buffer_list_length(GST_PAD_PROBE_INFO_BUFFER_LIST(info)));
  return GST_PAD_PROBE_OK;
}

}  // namespace

void init(int* argc, char*** argv) {
  static std::once_flag once;
  std::call_once(once, [&] {
    gst_init(argc, argv);
    // autovideosink tries DirectFB's sink when there is no X or Wayland display, and that
    // sink crashes without a framebuffer console: never pick it automatically.
    if (GstPluginFeature* dfb = GST_PLUGIN_FEATURE(gst_element_factory_find("dfbvideosink"))) {
      gst_plugin_feature_set_rank(dfb, GST_RANK_NONE);
      gst_object_unref(dfb);
    }
    // A developer runs from the build tree: use its plugin when none is installed.
    GstElementFactory* f = gst_element_factory_find("nnsegment");
    std::error_code ec;
    if (!f && *NN_GST_PLUGIN_DIR && std::filesystem::is_directory(NN_GST_PLUGIN_DIR, ec))
      gst_registry_scan_path(gst_registry_get(), NN_GST_PLUGIN_DIR);
    if (f) gst_object_unref(f);
  });
}

std::string Stats::to_line() const {
  std::string s =
      fmt("%6.1f s", elapsed_s) + " | " + std::to_string(frames) + " frames | " + fmt("%5.1f fps", fps);
  if (has_inference) {
    s += " | inference " + fmt("%.1f", inference_p50_ms) + " ms (p99 " + fmt("%.1f", inference_p99_ms) + ")";
    s += " | run " + std::to_string(inferences_run) + " skipped " + std::to_string(inferences_skipped);
    s += " | dropped " + std::to_string(frames_dropped);
  }
  if (sink_late) s += " | late " + std::to_string(sink_late);
  if (!delegate.empty()) s += " | " + delegate;
  return s;
}

std::string Stats::to_summary() const {
  std::string s = "frames:            " + std::to_string(frames) + " in " + fmt("%.2f s", elapsed_s) + " (" +
                  fmt("%.1f fps", average_fps) + ")\n";
  if (has_inference) {
    s += "inference:         p50 " + fmt("%.2f ms", inference_p50_ms) + ", p99 " +
         fmt("%.2f ms", inference_p99_ms) + " (budget " + std::to_string(latency_budget_ms) + " ms)\n";
    s += "inferences:        " + std::to_string(inferences_run) + " run, " +
         std::to_string(inferences_skipped) + " skipped, " + std::to_string(inferences_failed) + " failed\n";
    s += "frames dropped:    " + std::to_string(frames_dropped) + "\n";
    s += "delegate:          " + (delegate.empty() ? std::string("-") : delegate) + "\n";
  }
  s += "late at the sinks: " + std::to_string(sink_late) + "\n";
  return s;
}

struct App::Impl {
  GraphFile graph;
  Params params;
  std::unique_ptr<detail::Built> built;
  std::vector<std::unique_ptr<SinkCounter>> counters;

  std::function<void(const Stats&)> stats_fn;
  std::chrono::milliseconds interval{500};
  std::function<void(const Status&)> error_fn;
  std::function<void()> eos_fn;
  bool handle_interrupts = false;

  std::thread bus_thread;
  std::mutex m;
  std::condition_variable cv;
  bool started = false, finished = false;
  Status result;
  std::atomic<bool> stop_requested{false};
  std::atomic<uint64_t> sink_late{0};

  using Clock = std::chrono::steady_clock;
  Clock::time_point t0;
  Clock::time_point last_tick;
  uint64_t last_frames = 0;
  double last_fps = 0;
  mutable std::mutex stats_m;
  Stats final_stats;
  bool have_final = false;

  ~Impl() {
    stop_requested = true;
    if (bus_thread.joinable()) bus_thread.join();
    built.reset();
  }

  uint64_t frames() const {
    uint64_t best = 0;
    for (const auto& c : counters) best = std::max<uint64_t>(best, c->buffers.load());
    return best;
  }

  Stats collect() const {
    {
      std::lock_guard<std::mutex> lock(stats_m);
      if (have_final) return final_stats;
    }
    Stats s;
    s.frames = frames();
    if (started) s.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
    s.fps = last_fps;
    s.average_fps = s.elapsed_s > 0 ? static_cast<double>(s.frames) / s.elapsed_s : 0;
    s.sink_late = sink_late.load();
    for (const auto& [name, el] : built->nodes) {
      GParamSpec* ps = g_object_class_find_property(G_OBJECT_GET_CLASS(el), "stats");
      if (!ps || G_PARAM_SPEC_VALUE_TYPE(ps) != GST_TYPE_STRUCTURE) continue;
      GstStructure* st = nullptr;
      g_object_get(el, "stats", &st, nullptr);
      if (!st) continue;
      if (gst_structure_has_name(st, NN_SEGMENT_STATS)) {
        s.has_inference = true;
        gst_structure_get_double(st, NN_STAT_INFERENCE_P50_MS, &s.inference_p50_ms);
        gst_structure_get_double(st, NN_STAT_INFERENCE_P99_MS, &s.inference_p99_ms);
        guint64 v = 0;
        if (gst_structure_get_uint64(st, NN_STAT_INFERENCES_RUN, &v)) s.inferences_run += v;
        if (gst_structure_get_uint64(st, NN_STAT_INFERENCES_SKIPPED, &v)) s.inferences_skipped += v;
        if (gst_structure_get_uint64(st, NN_STAT_INFERENCES_FAILED, &v)) s.inferences_failed += v;
        if (gst_structure_get_uint64(st, NN_STAT_FRAMES_DROPPED, &v)) s.frames_dropped += v;
        guint u = 0;
        if (gst_structure_get_uint(st, NN_STAT_MASK_AGE, &u)) s.mask_age = u;
        if (gst_structure_get_uint(st, NN_STAT_LATENCY_BUDGET_MS, &u)) s.latency_budget_ms = u;
        if (const char* d = gst_structure_get_string(st, NN_STAT_DELEGATE)) s.delegate = d;
      }
      gst_structure_free(st);
    }
    return s;
  }

  std::string describe_source(GstObject* src) const {
    const std::string node = built->node_of(src);
    if (node.empty()) return GST_OBJECT_NAME(src);
    const NodeDecl* n = graph.node(node);
    return graph.where(n ? n->line : 0) + ": node '" + node + "' (" + (n ? n->element : "?") + ")";
  }

  void finish(Status st, bool eos) {
    // Final figures before NULL resets the elements.
    Stats last = collect();
    {
      std::lock_guard<std::mutex> lock(stats_m);
      final_stats = last;
      have_final = true;
    }
    gst_element_set_state(built->pipeline, GST_STATE_NULL);
    if (!st.is_ok() && error_fn) error_fn(st);
    if (eos && eos_fn) eos_fn();
    std::lock_guard<std::mutex> lock(m);
    result = st;
    finished = true;
    cv.notify_all();
  }

  void bus_loop() {
    GstBus* bus = gst_element_get_bus(built->pipeline);
    int handled_interrupts = g_interrupts.load();
    bool eos_sent = false;
    Clock::time_point eos_deadline{};
    last_tick = Clock::now();
    while (true) {
      GstMessage* msg = gst_bus_timed_pop(bus, 20 * GST_MSECOND);
      if (msg) {
        bool done = false;
        switch (GST_MESSAGE_TYPE(msg)) {
          case GST_MESSAGE_EOS:
            finish(Status::ok(), true);
            done = true;
            break;
          case GST_MESSAGE_ERROR: {
            GError* e = nullptr;
            gchar* dbg = nullptr;
            gst_message_parse_error(msg, &e, &dbg);
            std::string text = describe_source(GST_MESSAGE_SRC(msg)) + ": " + (e ? e->message : "error");
            if (dbg) text += std::string(" (") + dbg + ")";
            text += hint_for(dbg);
            g_clear_error(&e);
            g_free(dbg);
            finish(Status(StatusCode::kInternal, text), false);
            done = true;
            break;
          }
          case GST_MESSAGE_WARNING: {
            GError* e = nullptr;
            gchar* dbg = nullptr;
            gst_message_parse_warning(msg, &e, &dbg);
            g_printerr("warning: %s: %s\n", describe_source(GST_MESSAGE_SRC(msg)).c_str(),
                       e ? e->message : "");
            g_clear_error(&e);
            g_free(dbg);
            break;
          }
          case GST_MESSAGE_QOS: {
            GstObject* src = GST_MESSAGE_SRC(msg);
            if (GST_IS_ELEMENT(src)) {
              const char* klass =
                  gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(src), GST_ELEMENT_METADATA_KLASS);
              if (klass && std::string(klass).find("Sink") != std::string::npos) sink_late.fetch_add(1);
            }
            break;
          }
          default:
            break;
        }
        gst_message_unref(msg);
        if (done) break;
      }
      const auto now = Clock::now();
      const int interrupts = g_interrupts.load();
      if (handle_interrupts && interrupts != handled_interrupts) {
        if (eos_sent) {
          finish(Status(StatusCode::kInternal, "interrupted twice: stopped without waiting for EOS"), false);
          break;
        }
        handled_interrupts = interrupts;
        stop_requested = true;
      }
      if (stop_requested && !eos_sent) {
        eos_sent = true;
        eos_deadline = now + std::chrono::seconds(5);
        gst_element_send_event(built->pipeline, gst_event_new_eos());
      }
      if (eos_sent && now > eos_deadline) {
        g_printerr("warning: EOS did not reach the sinks within 5 s: stopping\n");
        finish(Status::ok(), true);
        break;
      }
      if (now - last_tick >= interval) {
        const uint64_t f = frames();
        last_fps =
            static_cast<double>(f - last_frames) / std::chrono::duration<double>(now - last_tick).count();
        last_frames = f;
        last_tick = now;
        if (stats_fn) stats_fn(collect());
      }
    }
    gst_object_unref(bus);
  }
};

namespace {
GstPadProbeReturn end_on_eos(GstPad*, GstPadProbeInfo* info, gpointer data) {
  GstEvent* ev = GST_PAD_PROBE_INFO_EVENT(info);
  if (ev && GST_EVENT_TYPE(ev) == GST_EVENT_EOS) static_cast<App::Impl*>(data)->stop_requested = true;
  return GST_PAD_PROBE_OK;
}
GstPadProbeReturn drop_qos(GstPad*, GstPadProbeInfo* info, gpointer) {
  GstEvent* ev = GST_PAD_PROBE_INFO_EVENT(info);
  return ev && GST_EVENT_TYPE(ev) == GST_EVENT_QOS ? GST_PAD_PROBE_DROP : GST_PAD_PROBE_OK;
}
}  // namespace

App::App(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
App::~App() = default;

Result<std::unique_ptr<App>> App::create(const GraphFile& graph, const Params& params,
                                         const BuildOptions& options) {
  init();
  NN_ASSIGN_OR_RETURN(Params resolved, resolve_params(graph, params));
  NN_ASSIGN_OR_RETURN(auto built, detail::build_pipeline(graph, resolved, options));
  auto impl = std::make_unique<Impl>();
  impl->graph = graph;
  impl->params = resolved;
  impl->built = std::move(built);
  // Count frames where they leave as frames: at the input of sinks and encoders (not of
  // file sinks, whose buffers are chunks of a container).
  for (const auto& [name, el] : impl->built->nodes) {
    const NodeDecl* decl = graph.node(name);
    if (decl && decl->ends_graph) {
      GstPad* src = gst_element_get_static_pad(el, "src");
      if (src) {
        gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, end_on_eos, impl.get(), nullptr);
        gst_object_unref(src);
      }
    }
    if (decl && decl->stop_qos)
      for (GList* l = GST_ELEMENT_PADS(el); l; l = l->next)
        if (GST_PAD_DIRECTION(l->data) == GST_PAD_SINK)
          gst_pad_add_probe(GST_PAD(l->data), GST_PAD_PROBE_TYPE_EVENT_UPSTREAM, drop_qos, nullptr, nullptr);
    const char* klass_c =
        gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(el), GST_ELEMENT_METADATA_KLASS);
    const std::string klass = klass_c ? klass_c : "";
    const bool frame_sink = klass.find("Sink") != std::string::npos &&
                            klass.find("File") == std::string::npos &&
                            klass.find("Network") == std::string::npos;
    if (!frame_sink && klass.find("Encoder") == std::string::npos) continue;
    GstPad* pad = gst_element_get_static_pad(el, "sink");
    if (!pad) continue;
    auto c = std::make_unique<SinkCounter>();
    c->node = name;
    gst_pad_add_probe(
        pad, static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST),
        count_buffer, c.get(), nullptr);
    gst_object_unref(pad);
    impl->counters.push_back(std::move(c));
  }
  return std::unique_ptr<App>(new App(std::move(impl)));
}

Result<std::unique_ptr<App>> App::load(const std::string& name_or_path, const Params& params,
                                       const BuildOptions& options) {
  NN_ASSIGN_OR_RETURN(std::string path, find_graph(name_or_path));
  NN_ASSIGN_OR_RETURN(GraphFile graph, GraphFile::load(path));
  return create(graph, params, options);
}

void App::on_stats(std::function<void(const Stats&)> fn, std::chrono::milliseconds interval) {
  impl_->stats_fn = std::move(fn);
  impl_->interval = interval;
}
void App::on_error(std::function<void(const Status&)> fn) {
  impl_->error_fn = std::move(fn);
}
void App::on_eos(std::function<void()> fn) {
  impl_->eos_fn = std::move(fn);
}

void App::stop_on_interrupt() {
  impl_->handle_interrupts = true;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

Status App::play() {
  Impl& d = *impl_;
  if (d.started)
    return Status(StatusCode::kInvalidArgument, "graph '" + d.graph.name + "' is already playing");
  d.started = true;
  // Sinks that write files: make their directory, as a user expects of an output path.
  for (const auto& [name, el] : d.built->nodes) {
    const char* klass = gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(el), GST_ELEMENT_METADATA_KLASS);
    GParamSpec* ps = g_object_class_find_property(G_OBJECT_GET_CLASS(el), "location");
    if (!klass || !std::strstr(klass, "Sink") || !ps || G_PARAM_SPEC_VALUE_TYPE(ps) != G_TYPE_STRING)
      continue;
    gchar* loc = nullptr;
    g_object_get(el, "location", &loc, nullptr);
    if (loc && *loc) {
      std::error_code ec;
      const std::filesystem::path parent = std::filesystem::path(loc).parent_path();
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    }
    g_free(loc);
  }
  d.t0 = Impl::Clock::now();
  const GstStateChangeReturn r = gst_element_set_state(d.built->pipeline, GST_STATE_PLAYING);
  if (r == GST_STATE_CHANGE_FAILURE) {
    // The element that failed has posted why.
    GstBus* bus = gst_element_get_bus(d.built->pipeline);
    GstMessage* msg = gst_bus_timed_pop_filtered(bus, GST_SECOND, GST_MESSAGE_ERROR);
    std::string text = "graph '" + d.graph.name + "' could not start";
    if (msg) {
      GError* e = nullptr;
      gchar* dbg = nullptr;
      gst_message_parse_error(msg, &e, &dbg);
      text = d.describe_source(GST_MESSAGE_SRC(msg)) + ": " + (e ? e->message : "error");
      if (dbg) text += std::string(" (") + dbg + ")";
      text += hint_for(dbg);
      g_clear_error(&e);
      g_free(dbg);
      gst_message_unref(msg);
    }
    gst_object_unref(bus);
    Status st(StatusCode::kInternal, text);
    d.finish(st, false);
    return st;
  }
  d.bus_thread = std::thread([&d] { d.bus_loop(); });
  return Status::ok();
}

Status App::wait() {
  Impl& d = *impl_;
  if (!d.started) return Status(StatusCode::kInvalidArgument, "graph '" + d.graph.name + "' was not played");
  {
    std::unique_lock<std::mutex> lock(d.m);
    d.cv.wait(lock, [&] { return d.finished; });
  }
  if (d.bus_thread.joinable() && d.bus_thread.get_id() != std::this_thread::get_id()) d.bus_thread.join();
  return d.result;
}

Status App::run() {
  NN_RETURN_IF_ERROR(play());
  return wait();
}

void App::stop() {
  impl_->stop_requested = true;
}

Stats App::stats() const {
  return impl_->collect();
}

Status App::set_property(const std::string& node, const std::string& property, const std::string& value) {
  GstElement* el = element(node);
  if (!el)
    return Status(StatusCode::kInvalidArgument,
                  "graph '" + impl_->graph.name + "' has no active node '" + node + "'");
  return detail::set_property_from_text(G_OBJECT(el), "node '" + node + "'", property, value);
}

GstElement* App::element(const std::string& node) const {
  return impl_->built->element(node);
}
GstElement* App::pipeline() const {
  return impl_->built->pipeline;
}

std::string App::dot() const {
  gchar* data = gst_debug_bin_to_dot_data(GST_BIN(impl_->built->pipeline), GST_DEBUG_GRAPH_SHOW_ALL);
  std::string s = data ? data : "";
  g_free(data);
  return s;
}

const GraphFile& App::graph() const {
  return impl_->graph;
}
const Params& App::params() const {
  return impl_->params;
}

std::vector<std::string> App::active_nodes() const {
  std::vector<std::string> out;
  for (const auto& [n, el] : impl_->built->nodes) out.push_back(n);
  return out;
}

Status check(const GraphFile& graph, const Params& given, const BuildOptions& options) {
  init();
  std::vector<std::string> errors;
  std::set<std::string> seen;
  // One line per problem; a problem that only one variant has says which.
  auto add = [&](const Status& s, const std::string& variant) {
    size_t pos = 0;
    const std::string& m = s.message();
    while (pos <= m.size()) {
      size_t nl = m.find('\n', pos);
      if (nl == std::string::npos) nl = m.size();
      std::string line = m.substr(pos, nl - pos);
      if (!line.empty() && seen.insert(line).second)
        errors.push_back(variant.empty() ? line : line + " [with " + variant + "]");
      pos = nl + 1;
    }
  };
  auto try_build = [&](const Params& p, const std::string& variant) {
    auto resolved = resolve_params(graph, p);
    if (!resolved.is_ok()) {
      add(resolved.status(), variant);
      return;
    }
    auto built = detail::build_pipeline(graph, resolved.value(), options);
    if (!built.is_ok()) add(built.status(), variant);
  };
  try_build(given, "");
  // Every variant a parameter with allowed values selects, the others as given/default.
  for (const auto& p : graph.params) {
    if (given.count(p.name)) continue;
    for (const auto& v : p.allowed) {
      if (p.default_value && v == *p.default_value) continue;
      Params variant = given;
      variant[p.name] = v;
      try_build(variant, p.name + "=" + v);
    }
  }
  if (errors.empty()) return Status::ok();
  std::string msg;
  for (size_t i = 0; i < errors.size(); ++i) msg += (i ? "\n" : "") + errors[i];
  return Status(StatusCode::kInvalidArgument, msg);
}

}  // namespace nn::graph

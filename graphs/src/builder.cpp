#include "builder.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

namespace nn::graph::detail {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// What a property accepts, for error messages.
std::string describe(GParamSpec* ps) {
  const GType t = G_PARAM_SPEC_VALUE_TYPE(ps);
  if (G_IS_PARAM_SPEC_ENUM(ps)) {
    GEnumClass* ec = G_PARAM_SPEC_ENUM(ps)->enum_class;
    std::vector<std::string> nicks;
    for (guint i = 0; i < ec->n_values; ++i) nicks.push_back(ec->values[i].value_nick);
    return "one of " + join(nicks);
  }
  if (G_IS_PARAM_SPEC_FLAGS(ps)) {
    GFlagsClass* fc = G_PARAM_SPEC_FLAGS(ps)->flags_class;
    std::vector<std::string> nicks;
    for (guint i = 0; i < fc->n_values; ++i) nicks.push_back(fc->values[i].value_nick);
    return "flags joined by '+': " + join(nicks);
  }
  if (G_IS_PARAM_SPEC_INT(ps)) {
    auto* p = G_PARAM_SPEC_INT(ps);
    return "an integer in " + std::to_string(p->minimum) + ".." + std::to_string(p->maximum);
  }
  if (G_IS_PARAM_SPEC_UINT(ps)) {
    auto* p = G_PARAM_SPEC_UINT(ps);
    return "an unsigned integer in " + std::to_string(p->minimum) + ".." + std::to_string(p->maximum);
  }
  if (G_IS_PARAM_SPEC_INT64(ps)) {
    auto* p = G_PARAM_SPEC_INT64(ps);
    return "an integer in " + std::to_string(p->minimum) + ".." + std::to_string(p->maximum);
  }
  if (G_IS_PARAM_SPEC_UINT64(ps)) {
    auto* p = G_PARAM_SPEC_UINT64(ps);
    return "an unsigned integer in " + std::to_string(p->minimum) + ".." + std::to_string(p->maximum);
  }
  if (G_IS_PARAM_SPEC_DOUBLE(ps)) {
    auto* p = G_PARAM_SPEC_DOUBLE(ps);
    char buf[96];
    g_snprintf(buf, sizeof buf, "a number in %g..%g", p->minimum, p->maximum);
    return buf;
  }
  if (G_IS_PARAM_SPEC_FLOAT(ps)) {
    auto* p = G_PARAM_SPEC_FLOAT(ps);
    char buf[96];
    g_snprintf(buf, sizeof buf, "a number in %g..%g", p->minimum, p->maximum);
    return buf;
  }
  if (t == G_TYPE_BOOLEAN) return "true or false";
  if (t == GST_TYPE_CAPS) return "caps, e.g. video/x-raw,format=RGBA";
  return std::string("a ") + g_type_name(t);
}

bool has_pad_template(GstElement* el, GstPadDirection dir, GstPadPresence* presence = nullptr) {
  for (const GList* l = gst_element_class_get_pad_template_list(GST_ELEMENT_GET_CLASS(el)); l; l = l->next) {
    auto* tmpl = static_cast<GstPadTemplate*>(l->data);
    if (GST_PAD_TEMPLATE_DIRECTION(tmpl) == dir) {
      if (presence) *presence = GST_PAD_TEMPLATE_PRESENCE(tmpl);
      return true;
    }
  }
  return false;
}

bool has_sometimes_src(GstElement* el) {
  for (const GList* l = gst_element_class_get_pad_template_list(GST_ELEMENT_GET_CLASS(el)); l; l = l->next) {
    auto* tmpl = static_cast<GstPadTemplate*>(l->data);
    if (GST_PAD_TEMPLATE_DIRECTION(tmpl) == GST_PAD_SRC &&
        GST_PAD_TEMPLATE_PRESENCE(tmpl) == GST_PAD_SOMETIMES)
      return true;
  }
  return false;
}

bool is_sink_element(GstElement* el) {
  const char* klass = gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(el), GST_ELEMENT_METADATA_KLASS);
  return klass && std::string(klass).find("Sink") != std::string::npos;
}

// The raw media type ("video/x-raw", "audio/x-raw") of caps that restrict the format, with
// the formats they allow; empty when they do not.
std::pair<std::string, std::string> restricted_raw(GstCaps* caps) {
  for (guint i = 0; caps && !gst_caps_is_any(caps) && i < gst_caps_get_size(caps); ++i) {
    const GstStructure* st = gst_caps_get_structure(caps, i);
    const std::string media = gst_structure_get_name(st);
    if (media != "video/x-raw" && media != "audio/x-raw") continue;
    const GValue* f = gst_structure_get_value(st, "format");
    if (!f) continue;
    gchar* text = gst_value_serialize(f);
    std::string formats = text ? text : "";
    g_free(text);
    for (size_t at; (at = formats.find("(string)")) != std::string::npos;) formats.erase(at, 8);
    return {media, formats};
  }
  return {};
}

// What el's sink restricts the raw format to: what its "sink" pad accepts now (a
// capsfilter's caps, an element's formats), else its always sink templates; empty when
// nothing restricts it. Converters take every format, so they never restrict.
std::pair<std::string, std::string> restricted_raw_input(GstElement* el) {
  const char* klass = gst_element_class_get_metadata(GST_ELEMENT_GET_CLASS(el), GST_ELEMENT_METADATA_KLASS);
  if (klass && std::string(klass).find("Converter") != std::string::npos) return {};
  if (GstPad* sink = gst_element_get_static_pad(el, "sink")) {
    GstCaps* caps = gst_pad_query_caps(sink, nullptr);
    gst_object_unref(sink);
    auto out = restricted_raw(caps);
    if (caps) gst_caps_unref(caps);
    if (!out.first.empty()) return out;
  }
  for (const GList* l = gst_element_class_get_pad_template_list(GST_ELEMENT_GET_CLASS(el)); l; l = l->next) {
    auto* tmpl = static_cast<GstPadTemplate*>(l->data);
    if (GST_PAD_TEMPLATE_DIRECTION(tmpl) != GST_PAD_SINK || GST_PAD_TEMPLATE_PRESENCE(tmpl) != GST_PAD_ALWAYS)
      continue;
    GstCaps* caps = gst_pad_template_get_caps(tmpl);
    auto out = restricted_raw(caps);
    gst_caps_unref(caps);
    if (!out.first.empty()) return out;
  }
  return {};
}

// The media type of caps' first structure ("video/x-raw"), or "".
std::string media_of(GstCaps* caps) {
  return caps && gst_caps_get_size(caps) ? gst_structure_get_name(gst_caps_get_structure(caps, 0)) : "";
}

void on_pad_added(GstElement* src, GstPad* pad, gpointer data) {
  auto* d = static_cast<DelayedLink*>(data);
  if (GST_PAD_DIRECTION(pad) != GST_PAD_SRC) return;
  GstPad* sink = gst_element_get_compatible_pad(d->dst, pad, nullptr);
  if (!sink) {
    // Another stream type (the audio of a file whose video this node takes) is left alone; the
    // same media type in a format the node does not take is the real error, said here: left
    // unlinked it would surface as decodebin's "not-linked", which blames the wrong node.
    GstCaps* caps = gst_pad_get_current_caps(pad);
    if (!caps) caps = gst_pad_query_caps(pad, nullptr);
    const auto [media, formats] = restricted_raw_input(d->dst);
    if (!media.empty() && media_of(caps) == media) {
      gchar* have = gst_caps_to_string(caps);
      const std::string convert = media == "video/x-raw" ? "videoconvert" : "audioconvert";
      const std::string msg = "node '" + d->dst_node + "' cannot take what node '" + d->src_node +
                              "' outputs (" + have + "): it takes " + media + " format " + formats +
                              "; put a " + convert + " between them";
      g_free(have);
      GError* e = g_error_new_literal(GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT, msg.c_str());
      gst_element_post_message(src, gst_message_new_error(GST_OBJECT(src), e, "not-negotiated"));
      g_error_free(e);
    } else {
      GST_INFO_OBJECT(src, "graph: pad %s has no match in node '%s' (another stream type): left unlinked",
                      GST_PAD_NAME(pad), d->dst_node.c_str());
    }
    if (caps) gst_caps_unref(caps);
    return;
  }
  if (!gst_pad_is_linked(sink)) {
    const GstPadLinkReturn r = gst_pad_link(pad, sink);
    if (r != GST_PAD_LINK_OK)
      GST_WARNING_OBJECT(src, "graph: linking %s to node '%s' failed: %s", GST_PAD_NAME(pad),
                         d->dst_node.c_str(), gst_pad_link_get_name(r));
  }
  gst_object_unref(sink);
}

std::string caps_of_templates(GstElement* el, GstPadDirection dir) {
  std::vector<std::string> out;
  for (const GList* l = gst_element_class_get_pad_template_list(GST_ELEMENT_GET_CLASS(el)); l; l = l->next) {
    auto* tmpl = static_cast<GstPadTemplate*>(l->data);
    if (GST_PAD_TEMPLATE_DIRECTION(tmpl) != dir) continue;
    GstCaps* caps = gst_pad_template_get_caps(tmpl);
    gchar* s = gst_caps_to_string(caps);
    std::string str = s;
    g_free(s);
    gst_caps_unref(caps);
    if (str.size() > 120) str = str.substr(0, 117) + "...";
    out.push_back(str);
  }
  return join(out, " | ");
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The installed element whose name is nearest a misspelt one (at most 2 edits away).
std::string closest_element(const std::string& name) {
  GList* all = gst_registry_get_feature_list(gst_registry_get(), GST_TYPE_ELEMENT_FACTORY);
  std::string best;
  size_t best_d = 3;
  for (GList* l = all; l; l = l->next) {
    const std::string cand = GST_OBJECT_NAME(l->data);
    const size_t d = edit_distance(name, cand);
    if (d < best_d) {
      best_d = d;
      best = cand;
    }
  }
  gst_plugin_feature_list_free(all);
  return best;
}

}  // namespace

Built::~Built() {
  if (pipeline) {
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(pipeline);
  }
}

GstElement* Built::element(const std::string& name) const {
  for (const auto& [n, el] : nodes)
    if (n == name) return el;
  return nullptr;
}

std::string Built::node_of(GstObject* obj) const {
  for (GstObject* o = obj; o; o = GST_OBJECT_PARENT(o))
    for (const auto& [n, el] : nodes)
      if (GST_OBJECT(el) == o) return n;
  return {};
}

Status set_property_from_text(GObject* obj, const std::string& what, const std::string& name,
                              const std::string& text) {
  GParamSpec* ps = g_object_class_find_property(G_OBJECT_GET_CLASS(obj), name.c_str());
  if (!ps) {
    std::vector<std::string> names;
    guint n = 0;
    GParamSpec** all = g_object_class_list_properties(G_OBJECT_GET_CLASS(obj), &n);
    for (guint i = 0; i < n; ++i)
      if ((all[i]->flags & G_PARAM_WRITABLE) && g_strcmp0(all[i]->name, "name") &&
          g_strcmp0(all[i]->name, "parent"))
        names.push_back(all[i]->name);
    g_free(all);
    return Status(StatusCode::kInvalidArgument,
                  what + ": no property '" + name + "' (writable: " + join(names) + ")");
  }
  if (!(ps->flags & G_PARAM_WRITABLE))
    return Status(StatusCode::kInvalidArgument, what + ": property '" + name + "' is read-only");
  GValue v = G_VALUE_INIT;
  g_value_init(&v, G_PARAM_SPEC_VALUE_TYPE(ps));
  const bool is_unsigned =
      G_IS_PARAM_SPEC_UINT(ps) || G_IS_PARAM_SPEC_UINT64(ps) || G_IS_PARAM_SPEC_ULONG(ps);
  if (is_unsigned && text.find_first_not_of(" \t") != std::string::npos &&
      text[text.find_first_not_of(" \t")] == '-') {
    g_value_unset(&v);  // strtoull would wrap "-3" around to a huge value
    return Status(StatusCode::kInvalidArgument, what + ": value '" + text + "' out of range for property '" +
                                                    name + "': expected " + describe(ps));
  }
  bool ok;
  if (G_PARAM_SPEC_VALUE_TYPE(ps) == G_TYPE_STRING) {
    g_value_set_string(&v, text.c_str());
    ok = true;
  } else {
    ok = gst_value_deserialize(&v, text.c_str());
  }
  if (!ok) {
    g_value_unset(&v);
    return Status(StatusCode::kInvalidArgument,
                  what + ": bad value '" + text + "' for property '" + name + "': expected " + describe(ps));
  }
  if (g_param_value_validate(ps, &v)) {  // TRUE: the value had to be changed to fit
    g_value_unset(&v);
    return Status(StatusCode::kInvalidArgument, what + ": value '" + text + "' out of range for property '" +
                                                    name + "': expected " + describe(ps));
  }
  g_object_set_property(obj, name.c_str(), &v);
  g_value_unset(&v);
  return Status::ok();
}

Result<std::unique_ptr<Built>> build_pipeline(const GraphFile& graph, const Params& resolved,
                                              const BuildOptions& options) {
  std::vector<std::string> errors;
  auto err = [&](int line, const std::string& msg) {
    const std::string e = graph.where(line) + ": " + msg;
    if (std::find(errors.begin(), errors.end(), e) == errors.end()) errors.push_back(e);
  };
  auto built = std::make_unique<Built>();
  built->pipeline = gst_pipeline_new(graph.name.c_str());
  gst_object_ref_sink(built->pipeline);

  std::string budget;
  if (!graph.latency_budget.empty()) {
    auto b = substitute(graph.latency_budget, resolved, graph);
    if (!b.is_ok())
      err(graph.latency_budget_line, "latency-budget-ms: " + b.status().message());
    else
      budget = b.value();
  }

  std::map<std::string, const NodeDecl*> active;
  for (const auto& n : graph.nodes)
    if (n.active(resolved)) active[n.name] = &n;

  std::string prev;              // the previous active node, default upstream of the next
  std::set<std::string> failed;  // nodes whose element could not be made
  for (const auto& n : graph.nodes) {
    if (!active.count(n.name)) continue;
    const std::string ctx = "node '" + n.name + "'";
    GstElementFactory* factory = gst_element_factory_find(n.element.c_str());
    if (!factory) {
      std::string hint;
      const std::string close = closest_element(n.element);
      GstElementFactory* ours = gst_element_factory_find("nnsegment");
      if (!close.empty())
        hint = " (did you mean '" + close + "'?)";
      else if (n.element.rfind("nn", 0) == 0 && !ours)
        hint =
            " (the nnpipe plugin is not loaded: build it, or set GST_PLUGIN_PATH to the build's plugins/ "
            "directory)";
      else
        hint = " (gst-inspect-1.0 lists the installed elements)";
      if (ours) gst_object_unref(ours);
      err(n.line, ctx + ": unknown element '" + n.element + "'" + hint);
      failed.insert(n.name);
      prev = n.name;
      continue;
    }
    GstElement* el = gst_element_factory_create(factory, n.name.c_str());
    gst_object_unref(factory);
    if (!el) {
      err(n.line, ctx + ": element '" + n.element + "' could not be created");
      failed.insert(n.name);
      prev = n.name;
      continue;
    }
    gst_bin_add(GST_BIN(built->pipeline), el);
    built->nodes.emplace_back(n.name, el);

    bool budget_set_by_node = false;
    for (const auto& p : n.props) {
      if (p.name == "latency-budget") budget_set_by_node = true;
      auto value = substitute(p.value, resolved, graph);
      if (!value.is_ok()) {
        err(p.line, ctx + ": property '" + p.name + "': " + value.status().message());
        continue;
      }
      Status s = set_property_from_text(G_OBJECT(el), ctx + " (" + n.element + ")", p.name, value.value());
      if (!s.is_ok()) {
        err(p.line, s.message());
        continue;
      }
      if (options.check_files && (p.name == "model" || p.name == "location") && !is_sink_element(el) &&
          !value.value().empty() && value.value().find('%') == std::string::npos) {
        std::error_code ec;
        if (!std::filesystem::exists(value.value(), ec))
          err(p.line, ctx + ": property '" + p.name + "': file not found: " + value.value());
      }
    }
    if (!budget.empty() && !budget_set_by_node &&
        g_object_class_find_property(G_OBJECT_GET_CLASS(el), "latency-budget")) {
      Status s = set_property_from_text(G_OBJECT(el), ctx + " (" + n.element + ")", "latency-budget", budget);
      if (!s.is_ok()) err(graph.latency_budget_line, "latency-budget-ms: " + s.message());
    }

    // Upstream links.
    std::vector<std::string> ups = n.from;
    GstPadPresence sink_presence = GST_PAD_ALWAYS;
    const bool has_sink = has_pad_template(el, GST_PAD_SINK, &sink_presence);
    if (ups.empty() && has_sink && !prev.empty()) ups.push_back(prev);
    if (!n.from.empty() && !has_sink)
      err(n.from_line, ctx + ": element '" + n.element + "' has no sink pad, it cannot link from anything");
    for (const auto& up : ups) {
      if (failed.count(up)) continue;
      if (!active.count(up)) {
        err(n.from_line,
            ctx + ": links from node '" + up + "', which is not part of the graph with these parameters");
        continue;
      }
      GstElement* src = built->element(up);
      if (!src) continue;
      if (!has_pad_template(src, GST_PAD_SRC)) {
        err(n.from_line ? n.from_line : n.line,
            ctx + ": cannot link from node '" + up +
                "': its element has no src pad (it is a sink); start a new "
                "chain with a source or give 'from'");
        continue;
      }
      if (auto pad = n.from_pads.find(up); pad != n.from_pads.end()) {
        if (gst_element_link_pads(src, nullptr, el, pad->second.c_str())) continue;
        err(n.from_line ? n.from_line : n.line,
            ctx + ": cannot link node '" + up + "' to pad '" + pad->second + "' of " + n.element +
                " (no such pad, or no compatible caps: " + up + " outputs " + caps_of_templates(src, GST_PAD_SRC) +
                ")");
        continue;
      }
      if (gst_element_link(src, el)) continue;
      if (has_sometimes_src(src)) {
        // What a decoder outputs depends on the file, but nearly every video decoder gives
        // I420 and audio decoders F32LE: a node after decodebin that takes neither fails on
        // almost every file, with an error GStreamer pins on decodebin ("not-linked").
        const auto [media, formats] = restricted_raw_input(el);
        const char* usual = media == "video/x-raw" ? "I420" : "F32LE";
        if (!media.empty() && formats.find(usual) == std::string::npos &&
            std::string(GST_OBJECT_NAME(gst_element_get_factory(src))).find("decodebin") != std::string::npos)
          err(n.line, ctx + " (" + n.element + ") takes only " + media + " format " + formats +
                          ", but what node '" + up +
                          "' (decodebin) outputs is " + usual + " for most files: put a " +
                          (media == "video/x-raw" ? "videoconvert" : "audioconvert") + " between them");
        auto d = std::make_unique<DelayedLink>();
        d->dst = el;
        d->src_node = up;
        d->dst_node = n.name;
        g_signal_connect(src, "pad-added", G_CALLBACK(on_pad_added), d.get());
        built->delayed.push_back(std::move(d));
        continue;
      }
      const NodeDecl* u = graph.node(up);
      err(n.from_line ? n.from_line : n.line,
          ctx + ": cannot link node '" + up + "' (line " + std::to_string(u ? u->line : 0) + ", " +
              std::string(GST_OBJECT_NAME(gst_element_get_factory(src))) + ") to it: no compatible pads (" +
              up + " outputs " + caps_of_templates(src, GST_PAD_SRC) + "; " + n.name + " accepts " +
              caps_of_templates(el, GST_PAD_SINK) + ")");
    }
    // Pad properties: pads exist now that the links requested them.
    for (const auto& [pad_name, props] : n.pads) {
      GstPad* pad = gst_element_get_static_pad(el, pad_name.c_str());
      if (!pad) {
        std::vector<std::string> names;
        for (GList* l = GST_ELEMENT_PADS(el); l; l = l->next) names.push_back(GST_PAD_NAME(l->data));
        err(props.empty() ? n.line : props.front().line,
            ctx + ": no pad '" + pad_name +
                "' after linking (pads: " + (names.empty() ? "none" : join(names)) + ")");
        continue;
      }
      for (const auto& p : props) {
        auto value = substitute(p.value, resolved, graph);
        Status s = value.is_ok() ? set_property_from_text(G_OBJECT(pad), ctx + " pad '" + pad_name + "'",
                                                          p.name, value.value())
                                 : value.status();
        if (!s.is_ok()) err(p.line, s.message());
      }
      gst_object_unref(pad);
    }
    prev = n.name;
  }

  // Pads nobody links: a chain that ends in a filter, a sink with nothing upstream.
  for (const auto& [name, el] : built->nodes) {
    const NodeDecl* n = graph.node(name);
    bool delayed_src = false, delayed_dst = false;
    for (const auto& d : built->delayed) {
      if (d->src_node == name) delayed_src = true;
      if (d->dst_node == name) delayed_dst = true;
    }
    // A side counts as connected when any of its pads is: extra always pads are optional
    // inputs (textoverlay's text_sink) or outputs.
    bool src_linked = false, sink_linked = false;
    for (GList* l = GST_ELEMENT_PADS(el); l; l = l->next)
      if (gst_pad_is_linked(GST_PAD(l->data)))
        (GST_PAD_DIRECTION(l->data) == GST_PAD_SRC ? src_linked : sink_linked) = true;
    for (GList* l = GST_ELEMENT_PADS(el); l; l = l->next) {
      GstPad* pad = GST_PAD(l->data);
      if (gst_pad_is_linked(pad)) continue;
      const bool is_src = GST_PAD_DIRECTION(pad) == GST_PAD_SRC;
      if (is_src ? src_linked : sink_linked) continue;
      if (is_src ? delayed_src : delayed_dst) continue;  // linked when the pad appears
      // A node that could not be made leaves its neighbours unlinked: that is reported already.
      if (!failed.empty()) continue;
      err(n->line, "node '" + name + "' (" + n->element + "): " + (is_src ? "src" : "sink") + " pad '" +
                       GST_PAD_NAME(pad) + "' is not linked" +
                       (is_src ? ": end the chain with a sink, or link a node from it"
                               : ": nothing feeds it; give 'from', or put a source before it"));
    }
    if (has_sometimes_src(el) && !delayed_src) {
      bool any_linked_src = false;
      for (GList* l = GST_ELEMENT_PADS(el); l; l = l->next)
        if (GST_PAD_DIRECTION(l->data) == GST_PAD_SRC && gst_pad_is_linked(GST_PAD(l->data)))
          any_linked_src = true;
      if (!any_linked_src)
        err(n->line, "node '" + name + "' (" + n->element +
                         "): its src pads (made at run time) are not linked: put a node after it");
    }
  }

  if (!errors.empty()) return Status(StatusCode::kInvalidArgument, join(errors, "\n"));
  return built;
}

}  // namespace nn::graph::detail

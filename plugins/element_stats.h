/* The names of the stats nnsegment and nnbackground report (their "stats" property and
 * the element messages nnsegment posts), defined once: the elements write them, the graph
 * runner (graphs/src/app.cpp), the tests and applications read them. Plain C, no
 * dependency, so anything that reads a GstStructure can include it. */
#pragma once

/* nnsegment: the structure's name and its fields. */
#define NN_SEGMENT_STATS "nnsegment-stats"
#define NN_STAT_INFERENCE_P50_MS "inference-p50-ms"       /* gdouble, worker wall time */
#define NN_STAT_INFERENCE_P99_MS "inference-p99-ms"       /* gdouble */
#define NN_STAT_INFERENCES_RUN "inferences-run"           /* guint64 */
#define NN_STAT_INFERENCES_FAILED "inferences-failed"     /* guint64 */
#define NN_STAT_INFERENCES_SKIPPED "inferences-skipped"   /* guint64 */
#define NN_STAT_FRAMES_IN "frames-in"                     /* guint64 */
#define NN_STAT_FRAMES_OUT "frames-out"                   /* guint64 */
#define NN_STAT_FRAMES_DROPPED "frames-dropped"           /* guint64 */
#define NN_STAT_MASK_AGE "mask-age"                       /* guint, frames */
#define NN_STAT_DELEGATE "delegate"                       /* string */
#define NN_STAT_PARTITIONS "partitions"                   /* guint */
#define NN_STAT_SCENE_CUTS "scene-cuts"                   /* guint64 */
#define NN_STAT_LATENCY_BUDGET_MS "latency-budget-ms"     /* guint */
#define NN_STAT_DOWNSTREAM_MS "downstream-ms"             /* gdouble */
#define NN_STAT_OVERRUN_MS "overrun-ms"                   /* gdouble */
#define NN_STAT_THREAD_PRIORITY "thread-priority"         /* string */
#define NN_STAT_RUNTIME_FALLBACKS "runtime-fallbacks"     /* guint64 */
/* CPU time (all threads that worked for the element) per frame, mean since start: the
 * streaming thread's part and, for nnsegment, the inference worker's per inference. */
#define NN_STAT_FRAME_CPU_MS "frame-cpu-ms"               /* gdouble */
#define NN_STAT_INFERENCE_CPU_MS "inference-cpu-ms"       /* gdouble */

/* nnbackground. */
#define NN_BACKGROUND_STATS "nnbackground-stats"
#define NN_STAT_COMPOSITE_P50_MS "composite-p50-ms"       /* gdouble, wall time */
#define NN_STAT_COMPOSITE_P99_MS "composite-p99-ms"       /* gdouble */
#define NN_STAT_FRAMES "frames"                           /* guint64 */
#define NN_STAT_FRAMES_WITHOUT_MASK "frames-without-mask" /* guint64 */
#define NN_STAT_BACKGROUND_FRAMES "background-frames"     /* guint64 */
#define NN_STAT_FRAMES_WITHOUT_BACKGROUND "frames-without-background" /* guint64 */
#define NN_STAT_FAST_FRAMES "fast-frames"                 /* guint64 */
/* frames composited on the streaming thread alone (it was real-time: no helper threads) */
#define NN_STAT_SERIAL_FRAMES "serial-frames"             /* guint64 */
/* also NN_STAT_MASK_AGE and NN_STAT_FRAME_CPU_MS */

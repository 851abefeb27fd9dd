package io.demeter.bench;

import java.nio.file.Path;
import java.time.Duration;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.filesystem.bucketassigners.BasePathBucketAssigner;
import org.apache.flink.streaming.api.functions.sink.filesystem.rollingpolicies.OnCheckpointRollingPolicy;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.ParameterTool;

/**
 * Demeter's benchmark job: rate-controlled generator → keyed tumbling event-time windows with
 * checkpointed state and per-record work → exactly-once FileSink (or discard). Operator uids
 * {@code source}, {@code window}, {@code sink}; see scripts/README.md for arguments and output.
 */
public final class BenchJob {
    static final String USAGE = String.join("\n",
            "demeter-bench arguments (rate: at least one of --rate, --trace, --rate-file):",
            "  --rate N               fixed total rate, records/s over all source subtasks",
            "  --trace FILE           follow a timestamp|value trace (one row per second)",
            "  --trace-speedup X      trace rows per second of wall time (default 1)",
            "  --rate-scale Y         multiply trace values by Y (default 1)",
            "  --trace-offset-s S     skip the first S trace rows (default 0)",
            "  --t0 EPOCH_MS          when the trace starts (default: submit time); pass the same",
            "                         value on resubmits to continue the trace where it was",
            "  --rate-file PATH       re-read every second; its number wins while it parses",
            "  --keys K               number of keys (default 1000)",
            "  --window-ms W          tumbling window length (default 5000)",
            "  --work-us U            busy-spin per record in the window operator (default 0)",
            "  --latency-window-s S   latency quantiles over the last S seconds (default 10)",
            "  --checkpoint-ms C      checkpoint interval (default: the configured one, else 5000)",
            "  --max-parallelism M    (default 128)",
            "  --source-parallelism P / --window-parallelism P   (default: the job's parallelism)",
            "  --sink file|discard    (default file; discard for profiling copies)",
            "  --output DIR           FileSink directory (required with --sink file)",
            "  --name NAME            job name (default demeter-bench)");

    private BenchJob() {}

    public static void main(String[] args) throws Exception {
        ParameterTool params = ParameterTool.fromArgs(args);
        if (params.has("help")) {
            System.out.println(USAGE);
            return;
        }
        if (!params.has("rate") && !params.has("trace") && !params.has("rate-file")) {
            throw new IllegalArgumentException("no rate given\n" + USAGE);
        }
        int keys = params.getInt("keys", 1000);
        String sinkKind = params.get("sink", "file");
        if (!sinkKind.equals("file") && !sinkKind.equals("discard")) {
            throw new IllegalArgumentException("--sink must be file or discard\n" + USAGE);
        }
        if (sinkKind.equals("file") && !params.has("output")) {
            throw new IllegalArgumentException("--sink file needs --output DIR\n" + USAGE);
        }

        int[] trace = params.has("trace")
                ? RateSchedule.readTrace(Path.of(params.get("trace")), params.getLong("trace-offset-s", 0))
                : null;
        RateSchedule schedule = new RateSchedule(
                params.getDouble("rate", 0), trace, params.getDouble("trace-speedup", 1.0),
                params.getDouble("rate-scale", 1.0), params.getLong("t0", System.currentTimeMillis()),
                params.get("rate-file", null));

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setMaxParallelism(params.getInt("max-parallelism", 128));
        if (params.has("checkpoint-ms")) {
            env.enableCheckpointing(params.getLong("checkpoint-ms"));
        } else if (env.getCheckpointConfig().getCheckpointInterval() <= 0) {
            env.enableCheckpointing(5000);
        }

        WatermarkStrategy<Event> watermarks = WatermarkStrategy.<Event>forGenerator(ctx -> new ClockWatermarks())
                .withTimestampAssigner((event, previous) -> event.ts);
        SingleOutputStreamOperator<Event> source = env
                .fromSource(new BenchSource(keys, schedule), watermarks, "generator")
                .uid("source");
        if (params.has("source-parallelism")) {
            source.setParallelism(params.getInt("source-parallelism"));
        }

        SingleOutputStreamOperator<String> windowed = source
                .keyBy(event -> event.key)
                .process(new WindowAggregate(params.getLong("window-ms", 5000), params.getLong("work-us", 0),
                        keys, params.getInt("latency-window-s", 10)))
                .name("window")
                .uid("window");
        if (params.has("window-parallelism")) {
            windowed.setParallelism(params.getInt("window-parallelism"));
        }

        sink(windowed, sinkKind, params.get("output", null));
        env.execute(params.get("name", "demeter-bench"));
    }

    private static void sink(DataStream<String> results, String kind, String output) {
        if (kind.equals("discard")) {
            results.sinkTo(new DiscardingSink<>()).name("sink").uid("sink");
            return;
        }
        // Part files are committed on checkpoint completion; in-progress/pending ones start with '.'.
        FileSink<String> files = FileSink
                .forRowFormat(new org.apache.flink.core.fs.Path(output), new SimpleStringEncoder<String>())
                .withBucketAssigner(new BasePathBucketAssigner<>())
                .withRollingPolicy(OnCheckpointRollingPolicy.build())
                .build();
        results.sinkTo(files).name("sink").uid("sink");
    }
}

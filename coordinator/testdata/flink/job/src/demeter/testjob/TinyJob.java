package demeter.testjob;

import java.time.Duration;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.util.ParameterTool;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.windowing.assigners.TumblingProcessingTimeWindows;

/**
 * Smallest job that exercises what the REST client reads: a rate-limited generator, keyed window
 * state (so savepoints carry state) and a sink. Args: --rate N (records/s per source subtask),
 * --keys K, --window-ms W.
 */
public class TinyJob {
    public static void main(String[] args) throws Exception {
        ParameterTool params = ParameterTool.fromArgs(args);
        double rate = params.getDouble("rate", 200);
        long keys = params.getLong("keys", 100);
        long windowMs = params.getLong("window-ms", 2000);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setMaxParallelism(128);
        DataGeneratorSource<Long> source =
                new DataGeneratorSource<>(
                        i -> i % keys, Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate), Types.LONG);
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "gen").uid("gen")
                .keyBy(k -> k)
                .window(TumblingProcessingTimeWindows.of(Duration.ofMillis(windowMs)))
                .aggregate(new Count()).uid("window").name("window-agg")
                .sinkTo(new DiscardingSink<>()).uid("sink").name("discard");
        env.execute("tiny-job");
    }

    /** Counts records per key and window. */
    public static class Count implements AggregateFunction<Long, Long, Long> {
        public Long createAccumulator() { return 0L; }
        public Long add(Long value, Long acc) { return acc + 1; }
        public Long getResult(Long acc) { return acc; }
        public Long merge(Long a, Long b) { return a + b; }
    }
}

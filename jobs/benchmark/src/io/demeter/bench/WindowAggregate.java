package io.demeter.bench;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * Keyed tumbling event-time windows (checkpointed MapState: window end → {@link WindowAcc}),
 * written as a process function so every record passes a hook: the per-record work that sets the
 * subtask's capacity, and the latency histogram. A record whose window has already fired (cannot
 * happen with {@link ClockWatermarks}, counted in {@code lateRecords}) joins the oldest open
 * window instead of being dropped, so the output stays a complete account of the input.
 *
 * <p>Gauges (operator metric group): {@code latencyP50Ms}, {@code latencyP95Ms},
 * {@code latencyP99Ms} — event time to arrival here, over the last {@code latencyWindowS} s;
 * {@code windowLagP95Ms} — window end to the moment its result goes to the sink.
 */
final class WindowAggregate extends KeyedProcessFunction<Integer, Event, String> {
    private static final long serialVersionUID = 1L;

    private final long windowMs;
    private final long workNs;
    private final int keys;
    private final int latencyWindowS;

    private transient MapState<Long, WindowAcc> windows;
    private transient SlidingHistogram latency;
    private transient SlidingHistogram windowLag;
    private transient Counter lateRecords;

    WindowAggregate(long windowMs, long workUs, int keys, int latencyWindowS) {
        this.windowMs = windowMs;
        this.workNs = workUs * 1000L;
        this.keys = keys;
        this.latencyWindowS = latencyWindowS;
    }

    @Override
    public void open(OpenContext openContext) {
        windows = getRuntimeContext().getMapState(
                new MapStateDescriptor<>("windows", Types.LONG, TypeInformation.of(WindowAcc.class)));
        latency = new SlidingHistogram(latencyWindowS);
        windowLag = new SlidingHistogram(latencyWindowS);
        MetricGroup metrics = getRuntimeContext().getMetricGroup();
        metrics.gauge("latencyP50Ms", () -> latency.quantile(0.50, BenchClock.nowMs()));
        metrics.gauge("latencyP95Ms", () -> latency.quantile(0.95, BenchClock.nowMs()));
        metrics.gauge("latencyP99Ms", () -> latency.quantile(0.99, BenchClock.nowMs()));
        metrics.gauge("windowLagP95Ms", () -> windowLag.quantile(0.95, BenchClock.nowMs()));
        lateRecords = metrics.counter("lateRecords");
    }

    @Override
    public void processElement(Event event, Context ctx, Collector<String> out) throws Exception {
        long now = BenchClock.nowMs();
        latency.record(now - event.ts, now);
        spin();
        long end = windowEnd(event.ts);
        long watermark = ctx.timerService().currentWatermark();
        if (end - 1 <= watermark) {
            lateRecords.inc();
            end = windowEnd(watermark + 1);
        }
        WindowAcc acc = windows.get(end);
        if (acc == null) {
            acc = new WindowAcc();
            ctx.timerService().registerEventTimeTimer(end - 1);
        }
        acc.add(event.seq, event.ts, keys);
        windows.put(end, acc);
    }

    @Override
    public void onTimer(long timestamp, OnTimerContext ctx, Collector<String> out) throws Exception {
        long end = timestamp + 1;
        WindowAcc acc = windows.get(end);
        if (acc == null) {
            return;
        }
        long now = BenchClock.nowMs();
        out.collect(acc.toLine(end, ctx.getCurrentKey(), now, keys));
        windows.remove(end);
        windowLag.record(now - end, now);
    }

    private long windowEnd(long ts) {
        return ts - Math.floorMod(ts, windowMs) + windowMs;
    }

    /** Busy-spin: CPU work per record, so capacity per subtask ≈ 1e6 / workUs records/s. */
    private void spin() {
        if (workNs <= 0) {
            return;
        }
        long until = System.nanoTime() + workNs;
        while (System.nanoTime() < until) {
            Thread.onSpinWait();
        }
    }
}

package io.demeter.bench;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;

/**
 * Watermarks that follow the source's clock, not only its records: records are stamped with
 * {@link BenchClock#nowMs()} in the same task thread that emits these watermarks, so a record
 * made after a watermark {@code now - 1} is never late, and windows keep closing while the rate
 * is zero or a reader has nothing to read.
 */
final class ClockWatermarks implements WatermarkGenerator<Event> {
    private long maxTs = Long.MIN_VALUE;

    @Override
    public void onEvent(Event event, long eventTimestamp, WatermarkOutput output) {
        maxTs = Math.max(maxTs, eventTimestamp);
    }

    @Override
    public void onPeriodicEmit(WatermarkOutput output) {
        output.emitWatermark(new Watermark(Math.max(maxTs, BenchClock.nowMs()) - 1));
    }
}

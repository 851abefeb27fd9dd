package io.demeter.bench;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;

/**
 * Watermarks that follow the source's timetable, not only its records, so windows keep closing
 * while the rate is zero or a reader has nothing to read. Records are stamped with the time they
 * were due ({@link BacklogReader}), in order per reader; the watermark stays just below the
 * reader's next due record (and below now), so no record is ever late, also while a backlog of
 * old stamps drains. The reader is found through the task thread both run on.
 */
final class ClockWatermarks implements WatermarkGenerator<Event> {
    private long maxTs = Long.MIN_VALUE;

    @Override
    public void onEvent(Event event, long eventTimestamp, WatermarkOutput output) {
        maxTs = Math.max(maxTs, eventTimestamp);
    }

    @Override
    public void onPeriodicEmit(WatermarkOutput output) {
        long now = BenchClock.nowMs();
        BacklogReader reader = BacklogReader.onThisThread();
        long bound = reader == null ? now : reader.watermarkBoundMs(now);
        output.emitWatermark(new Watermark(Math.max(maxTs, bound) - 1));
    }
}

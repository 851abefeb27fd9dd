package io.demeter.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.core.io.InputStatus;

/**
 * The generator's reader, behaving like a consumer of a message queue fed at the schedule's rate:
 * record {@code k} of a split is due when the split's share of {@link RateSchedule#dueBy} passes
 * {@code k}, and is stamped with that due time. A job that was down, restarting or back-pressured
 * finds a backlog and drains it as fast as it can, and the records' latency shows what the outage
 * cost — a plain rate limiter would instead drop what it could not emit, hiding that cost.
 *
 * <p>Splits are DataGeneratorSource's: made once at the first run (one per source subtask, each a
 * contiguous range of sequence numbers) and restored as they were, so a reader may hold several.
 * A split's origin (where its range started) is recomputed from its id and end with Flink's own
 * splitting; its checkpointed position then says how many of its records were emitted. A split
 * restored ahead of the schedule (a resubmit with a new {@code --t0}) keeps its position and
 * counts from there, and a split that never emitted starts its queue when it first runs (the
 * job's deployment is not a backlog).
 *
 * <p>With a rate file the schedule is not known in advance: the due count is integrated while
 * the reader runs, records are stamped with the emit time, and an outage's backlog is lost.
 *
 * <p>Metrics: {@code pendingRecords} (Flink's standard source metric) is the backlog;
 * {@code targetRateTotal} the schedule's rate now; {@code rateShare} this reader's share of it.
 */
final class BacklogReader implements SourceReader<Event, NumberSequenceSplit> {
    /** Longest wait before looking again, so a changed rate file or rate is seen promptly. */
    private static final long MAX_WAIT_MS = 200L;
    private static final ThreadLocal<BacklogReader> ON_THIS_THREAD = new ThreadLocal<>();

    private final SourceReaderContext context;
    private final RateSchedule schedule;
    private final int keys;
    private final List<SplitState> splits = new ArrayList<>();
    private CompletableFuture<Void> available = new CompletableFuture<>();
    /** Rate-file mode: records due since this reader started, over the whole job. */
    private double integratedDue;
    private long integratedAtMs = Long.MIN_VALUE;
    private volatile double totalRate;
    private volatile double share;

    BacklogReader(SourceReaderContext context, RateSchedule schedule, int keys) {
        this.context = context;
        this.schedule = schedule;
        this.keys = keys;
        context.metricGroup().gauge("targetRateTotal", () -> totalRate);
        context.metricGroup().gauge("rateShare", () -> share);
        context.metricGroup().setPendingRecordsGauge(this::backlog);
    }

    /** The reader whose task runs on this thread (the watermark generator's), or null. */
    static BacklogReader onThisThread() {
        return ON_THIS_THREAD.get();
    }

    /**
     * Watermarks must stay below the next record's stamp: the earliest next due time of this
     * reader's splits, and never above now (a record may become due any moment).
     */
    long watermarkBoundMs(long nowMs) {
        long bound = nowMs;
        for (SplitState s : splits) {
            bound = Math.min(bound, s.nextDueMs);
        }
        return bound;
    }

    @Override
    public void start() {
        ON_THIS_THREAD.set(this);
        // Restored splits arrive before start; a fresh reader asks the enumerator for one (the
        // splits are unbounded, so it never needs another).
        if (splits.isEmpty()) {
            context.sendSplitRequest();
        }
    }

    @Override
    public InputStatus pollNext(ReaderOutput<Event> output) {
        ON_THIS_THREAD.set(this);
        long now = BenchClock.nowMs();
        refreshDue(now);
        SplitState next = null;
        for (SplitState s : splits) {
            if (next == null || s.nextDueMs < next.nextDueMs) {
                next = s;
            }
        }
        if (next == null || next.nextDueMs > now) {
            long wait = next == null ? MAX_WAIT_MS : Math.min(MAX_WAIT_MS, next.nextDueMs - now);
            available = new CompletableFuture<>();
            CompletableFuture<Void> mine = available;
            CompletableFuture.delayedExecutor(Math.max(1, wait), TimeUnit.MILLISECONDS)
                    .execute(() -> mine.complete(null));
            return InputStatus.NOTHING_AVAILABLE;
        }
        long seq = next.position;
        long stamp = schedule.replayable() ? next.nextDueMs : now;
        output.collect(new Event(seq, stamp, (int) (seq % keys)), stamp);
        next.position = seq + 1;
        next.nextDueMs = nextDueMs(next, now);
        return InputStatus.MORE_AVAILABLE;
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
        return available;
    }

    @Override
    public void addSplits(List<NumberSequenceSplit> added) {
        long now = BenchClock.nowMs();
        refreshDue(now);
        for (NumberSequenceSplit split : added) {
            SplitState s = new SplitState(split, originOf(split));
            double due = s.share * dueNow(now);
            double behind = due - (split.from() - s.origin);
            // A split that never emitted starts its queue now (a consumer starting at the
            // latest offset): the job's deployment is not a backlog. One restored ahead of the
            // schedule (a resubmit with a new t0) counts from where it is.
            s.offset = split.from() == s.origin ? due : Math.min(0.0, behind);
            s.nextDueMs = nextDueMs(s, now);
            splits.add(s);
        }
        double covered = 0;
        for (SplitState s : splits) {
            covered += s.share;
        }
        share = Math.min(1.0, covered);
        available.complete(null);
    }

    @Override
    public List<NumberSequenceSplit> snapshotState(long checkpointId) {
        List<NumberSequenceSplit> state = new ArrayList<>(splits.size());
        for (SplitState s : splits) {
            state.add(new NumberSequenceSplit(s.id, s.position, s.to));
        }
        return state;
    }

    @Override
    public void notifyNoMoreSplits() {}

    @Override
    public void close() {
        ON_THIS_THREAD.remove();
        available.complete(null);
    }

    /** Records due but not emitted, over this reader's splits. */
    private long backlog() {
        long now = BenchClock.nowMs();
        double due = schedule.replayable() ? schedule.dueBy(now) : integratedDue;
        long pending = 0;
        for (SplitState s : splits) {
            pending += Math.max(0L, (long) Math.floor(s.share * due - s.offset) - (s.position - s.origin));
        }
        return pending;
    }

    private void refreshDue(long now) {
        totalRate = currentRate(now);
        if (schedule.replayable()) {
            return;
        }
        if (integratedAtMs != Long.MIN_VALUE && now > integratedAtMs) {
            integratedDue += totalRate * (now - integratedAtMs) / 1000.0;
        }
        integratedAtMs = now;
        for (SplitState s : splits) {
            s.nextDueMs = nextDueMs(s, now);
        }
    }

    private double dueNow(long now) {
        return schedule.replayable() ? schedule.dueBy(now) : integratedDue;
    }

    private double currentRate(long now) {
        if (!schedule.replayable()) {
            double fromFile = schedule.readRateFileThrottled(now);
            if (!Double.isNaN(fromFile)) {
                return fromFile;
            }
        }
        return schedule.plannedRate(now);
    }

    /** When the split's next record is due; MAX while the schedule never gets there. */
    private long nextDueMs(SplitState s, long now) {
        if (s.share <= 0) {
            return Long.MAX_VALUE;
        }
        double records = (s.position - s.origin + 1 + s.offset) / s.share;
        if (schedule.replayable()) {
            return schedule.dueAtMs(records);
        }
        return integratedDue >= records ? now : Long.MAX_VALUE;
    }

    /** Where the split's range began, from Flink's own splitting of the generator's range. */
    private static long originOf(NumberSequenceSplit split) {
        Origins origins = new Origins();
        for (int parallelism = 1; parallelism <= Origins.MAX_SPLITS; parallelism++) {
            for (NumberSequenceSplit first : origins.splits(parallelism)) {
                if (first.splitId().equals(split.splitId()) && first.to() == split.to()) {
                    return first.from();
                }
            }
        }
        // Not a split this source made: count from where it is.
        return split.from();
    }

    /** DataGeneratorSource(count = Long.MAX_VALUE) ranges over [0, Long.MAX_VALUE - 1]. */
    private static final class Origins extends NumberSequenceSource {
        private static final long serialVersionUID = 1L;
        static final int MAX_SPLITS = 512;

        Origins() {
            super(0, Long.MAX_VALUE - 1);
        }

        List<NumberSequenceSplit> splits(int parallelism) {
            return splitNumberRange(getFrom(), getTo(), parallelism);
        }
    }

    private static final class SplitState {
        final String id;
        final long origin;
        final long to;
        final double share;
        volatile long position;
        /**
         * Due records not counted for this split: those due before it first ran, or negative
         * when it was restored ahead of the schedule.
         */
        double offset;
        long nextDueMs;

        SplitState(NumberSequenceSplit split, long origin) {
            this.id = split.splitId();
            this.origin = origin;
            this.to = split.to();
            this.position = split.from();
            this.share = ((double) split.to() - (double) origin + 1) / (double) Long.MAX_VALUE;
        }
    }
}

package io.demeter.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.core.io.InputStatus;

/**
 * Sets the reader's share of the total rate to the fraction of the sequence range its splits
 * cover. DataGeneratorSource makes one split per subtask at the first run and restores splits as
 * they were, so after a restore at a higher parallelism some readers hold no split; a plain
 * {@code total / parallelism} limiter would then lose rate. (Flink 2.3's RateLimitedSourceReader
 * never calls {@code RateLimiter.notifyAddingSplit}, hence this wrapper.) A reader holding two
 * splits reads only the first (they are unbounded) but at both splits' share, so the total holds.
 */
final class SplitShareReader implements SourceReader<Event, NumberSequenceSplit> {
    private final SourceReader<Event, NumberSequenceSplit> delegate;
    private final TokenBucketLimiter limiter;
    private final List<NumberSequenceSplit> splits = new ArrayList<>();

    SplitShareReader(SourceReader<Event, NumberSequenceSplit> delegate, TokenBucketLimiter limiter, SourceReaderContext context) {
        this.delegate = delegate;
        this.limiter = limiter;
        context.metricGroup().gauge("targetRateTotal", limiter::totalRate);
        context.metricGroup().gauge("rateShare", limiter::share);
    }

    @Override
    public void addSplits(List<NumberSequenceSplit> added) {
        splits.addAll(added);
        double covered = 0;
        for (NumberSequenceSplit split : splits) {
            covered += (double) split.to() - (double) split.from() + 1;
        }
        limiter.setShare(Math.min(1.0, covered / (double) Long.MAX_VALUE));
        delegate.addSplits(added);
    }

    @Override
    public void start() {
        delegate.start();
    }

    @Override
    public InputStatus pollNext(ReaderOutput<Event> output) throws Exception {
        return delegate.pollNext(output);
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
        return delegate.isAvailable();
    }

    @Override
    public void notifyNoMoreSplits() {
        delegate.notifyNoMoreSplits();
    }

    @Override
    public List<NumberSequenceSplit> snapshotState(long checkpointId) {
        return delegate.snapshotState(checkpointId);
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) throws Exception {
        delegate.notifyCheckpointComplete(checkpointId);
    }

    @Override
    public void close() throws Exception {
        delegate.close();
    }
}

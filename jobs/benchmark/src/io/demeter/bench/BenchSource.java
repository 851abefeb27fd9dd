package io.demeter.bench;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimitedSourceReader;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratingIteratorSourceReader;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.util.NumberSequenceIterator;

/**
 * An unbounded DataGeneratorSource whose readers are rate limited by {@link RateSchedule} with a
 * split-aware share. Sequence numbers are the generator's indices: split {@code i} of {@code S}
 * (S = source parallelism of the first run) covers a contiguous range, and the split's position is
 * checkpointed, so numbers are deterministic across restores.
 */
final class BenchSource extends DataGeneratorSource<Event> {
    private static final long serialVersionUID = 1L;

    private final RateSchedule schedule;

    BenchSource(int keys, RateSchedule schedule) {
        super(new Generator(keys), Long.MAX_VALUE, TypeInformation.of(Event.class));
        this.schedule = schedule;
    }

    @Override
    public SourceReader<Event, NumberSequenceSplit> createReader(SourceReaderContext context) {
        TokenBucketLimiter limiter = new TokenBucketLimiter(schedule);
        GeneratingIteratorSourceReader<Long, Event, NumberSequenceIterator, NumberSequenceSplit> generating =
                new GeneratingIteratorSourceReader<>(context, getGeneratorFunction());
        return new SplitShareReader(new RateLimitedSourceReader<>(generating, limiter), limiter, context);
    }

    /** Stamps each index with the emit time and its key. */
    static final class Generator implements GeneratorFunction<Long, Event> {
        private static final long serialVersionUID = 1L;
        private final int keys;

        Generator(int keys) {
            this.keys = keys;
        }

        @Override
        public Event map(Long index) {
            return new Event(index, BenchClock.nowMs(), (int) (index % keys));
        }
    }
}

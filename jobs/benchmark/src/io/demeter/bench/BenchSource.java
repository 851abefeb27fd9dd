package io.demeter.bench;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;

/**
 * An unbounded DataGeneratorSource whose readers emit on {@link RateSchedule}'s timetable and
 * keep a backlog ({@link BacklogReader}). DataGeneratorSource is kept for its enumerator and split
 * serializer: split {@code i} of {@code S} (S = source parallelism of the first run) covers a
 * contiguous range of sequence numbers and its position is checkpointed, so numbers are
 * deterministic across restores and rescales.
 */
final class BenchSource extends DataGeneratorSource<Event> {
    private static final long serialVersionUID = 1L;

    private final RateSchedule schedule;
    private final int keys;

    BenchSource(int keys, RateSchedule schedule) {
        super(new Generator(keys), Long.MAX_VALUE, TypeInformation.of(Event.class));
        this.schedule = schedule;
        this.keys = keys;
    }

    @Override
    public SourceReader<Event, NumberSequenceSplit> createReader(SourceReaderContext context) {
        return new BacklogReader(context, schedule, keys);
    }

    /** DataGeneratorSource's own reader would use this; ours makes its events itself. */
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

package io.demeter.bench;

import java.util.Arrays;

/**
 * One key's tumbling window: count, event-time range, and the sequence numbers seen as runs
 * {@code first, first+step, …, last} (step = number of keys). A key receives the numbers of each
 * split in order, so a window holds about one run per split: compact, and still an exact list.
 * A Flink POJO (public fields, no-argument constructor).
 */
public class WindowAcc {
    public long count;
    public long minTs = Long.MAX_VALUE;
    public long maxTs = Long.MIN_VALUE;
    public long[] first = new long[2];
    public long[] last = new long[2];
    public int runs;

    public WindowAcc() {}

    void add(long seq, long ts, int step) {
        count++;
        minTs = Math.min(minTs, ts);
        maxTs = Math.max(maxTs, ts);
        for (int r = 0; r < runs; r++) {
            if (last[r] + step == seq) {
                last[r] = seq;
                return;
            }
        }
        if (runs == first.length) {
            first = Arrays.copyOf(first, runs * 2);
            last = Arrays.copyOf(last, runs * 2);
        }
        first[runs] = seq;
        last[runs] = seq;
        runs++;
    }

    /** {@code windowEnd|key|count|minTs|maxTs|firedAt|step|first-last,first-last…} */
    String toLine(long windowEnd, int key, long firedAt, int step) {
        StringBuilder line = new StringBuilder(64 + runs * 40)
                .append(windowEnd).append('|').append(key).append('|').append(count).append('|')
                .append(minTs).append('|').append(maxTs).append('|').append(firedAt).append('|')
                .append(step).append('|');
        for (int r = 0; r < runs; r++) {
            if (r > 0) {
                line.append(',');
            }
            line.append(first[r]).append('-').append(last[r]);
        }
        return line.toString();
    }
}

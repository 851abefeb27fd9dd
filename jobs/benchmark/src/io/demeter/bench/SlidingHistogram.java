package io.demeter.bench;

import java.util.Arrays;

/**
 * Quantiles of millisecond values over the last {@code seconds} seconds: one log-linear histogram
 * per second in a ring (exact below 256 ms, then 32 buckets per power of two, i.e. within ~3 %).
 * Recording is O(1); a quantile sums the ring. The metric reporter reads while the task writes,
 * hence the lock (uncontended almost always).
 */
final class SlidingHistogram {
    private static final int LINEAR = 256;
    private static final int SUB_BITS = 5;
    private static final int SUB = 1 << SUB_BITS;
    private static final int BUCKETS = LINEAR + (63 - 8) * SUB;

    private final int seconds;
    private final int[][] counts;
    private final long[] slotSecond;

    SlidingHistogram(int seconds) {
        this.seconds = seconds;
        this.counts = new int[seconds][BUCKETS];
        this.slotSecond = new long[seconds];
        Arrays.fill(slotSecond, Long.MIN_VALUE);
    }

    static int bucket(long value) {
        if (value < LINEAR) {
            return (int) Math.max(0, value);
        }
        int exp = 63 - Long.numberOfLeadingZeros(value);
        int sub = (int) (value >>> (exp - SUB_BITS)) & (SUB - 1);
        return LINEAR + (exp - 8) * SUB + sub;
    }

    /** Lower bound of a bucket's values. */
    static long bucketValue(int bucket) {
        if (bucket < LINEAR) {
            return bucket;
        }
        int exp = (bucket - LINEAR) / SUB + 8;
        int sub = (bucket - LINEAR) % SUB;
        return ((long) SUB + sub) << (exp - SUB_BITS);
    }

    synchronized void record(long valueMs, long nowMs) {
        long second = nowMs / 1000;
        int slot = (int) Math.floorMod(second, (long) seconds);
        if (slotSecond[slot] != second) {
            Arrays.fill(counts[slot], 0);
            slotSecond[slot] = second;
        }
        counts[slot][bucket(valueMs)]++;
    }

    /** The q-quantile (0..1) of the values recorded in the window, NaN when there are none. */
    synchronized double quantile(double q, long nowMs) {
        long second = nowMs / 1000;
        long[] sum = new long[BUCKETS];
        long total = 0;
        for (int s = 0; s < seconds; s++) {
            if (slotSecond[s] > second - seconds && slotSecond[s] <= second) {
                for (int b = 0; b < BUCKETS; b++) {
                    sum[b] += counts[s][b];
                }
            }
        }
        for (long c : sum) {
            total += c;
        }
        if (total == 0) {
            return Double.NaN;
        }
        long rank = (long) Math.ceil(q * total);
        long seen = 0;
        for (int b = 0; b < BUCKETS; b++) {
            seen += sum[b];
            if (seen >= rank) {
                return bucketValue(b);
            }
        }
        return bucketValue(BUCKETS - 1);
    }
}

package io.demeter.bench;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiter;

/**
 * Token bucket for one source reader: {@code total rate × share}. The share is set by
 * {@link SplitShareReader} from the splits the reader holds. Waits use the JDK's delayed executor
 * (no thread of ours to leak when the job's class loader goes away). A reader that fell behind
 * (backpressure) catches up by at most {@link #BURST_NS}: event time is emit time, so lag shows as
 * latency downstream rather than as a burst here.
 */
final class TokenBucketLimiter implements RateLimiter<NumberSequenceSplit> {
    private static final long BURST_NS = 20_000_000L;
    private static final long SPIN_FREE_NS = 1_000_000L;
    private static final long RATE_FILE_PERIOD_MS = 1000L;
    private static final long IDLE_RECHECK_MS = 100L;
    /** Below this (records/s) a reader idles: a slot hours away would only overflow the clock. */
    private static final double MIN_RATE = 1e-3;
    private static final CompletableFuture<Void> NOW = CompletableFuture.completedFuture(null);

    private final RateSchedule schedule;
    private volatile double share;
    private volatile double totalRate;
    private long nextFreeNs = Long.MIN_VALUE;
    private long rateFileReadAtMs;
    private double rateFileValue = Double.NaN;

    TokenBucketLimiter(RateSchedule schedule) {
        this.schedule = schedule;
    }

    void setShare(double share) {
        this.share = share;
    }

    double share() {
        return share;
    }

    /** Total rate of the whole job the limiter last aimed at. */
    double totalRate() {
        return totalRate;
    }

    @Override
    public synchronized CompletionStage<Void> acquire(int permits) {
        long waitNs = reserve(permits);
        if (waitNs >= 0 && waitNs <= SPIN_FREE_NS) {
            return NOW;
        }
        CompletableFuture<Void> permit = new CompletableFuture<>();
        completeLater(permit, waitNs, permits);
        return permit;
    }

    private void completeLater(CompletableFuture<Void> permit, long waitNs, int permits) {
        if (waitNs < 0) {
            // Rate zero: nothing to reserve yet, look again shortly.
            CompletableFuture.delayedExecutor(IDLE_RECHECK_MS, TimeUnit.MILLISECONDS)
                    .execute(() -> retry(permit, permits));
        } else {
            CompletableFuture.delayedExecutor(waitNs, TimeUnit.NANOSECONDS).execute(() -> permit.complete(null));
        }
    }

    private synchronized void retry(CompletableFuture<Void> permit, int permits) {
        long waitNs = reserve(permits);
        if (waitNs >= 0 && waitNs <= SPIN_FREE_NS) {
            permit.complete(null);
        } else {
            completeLater(permit, waitNs, permits);
        }
    }

    /** Books the next slot; returns ns until it, or -1 while the rate is (about) zero. */
    private long reserve(int permits) {
        long nowNs = System.nanoTime();
        double rate = currentTotalRate() * share;
        if (!(rate >= MIN_RATE)) {
            nextFreeNs = Long.MIN_VALUE;
            return -1;
        }
        if (nextFreeNs == Long.MIN_VALUE || nextFreeNs < nowNs - BURST_NS) {
            nextFreeNs = nowNs - BURST_NS;
        }
        long slot = nextFreeNs;
        nextFreeNs += (long) (permits * 1e9 / rate);
        return Math.max(0, slot - nowNs);
    }

    private double currentTotalRate() {
        long nowMs = BenchClock.nowMs();
        if (schedule.rateFile() != null && nowMs - rateFileReadAtMs >= RATE_FILE_PERIOD_MS) {
            rateFileValue = schedule.readRateFile();
            rateFileReadAtMs = nowMs;
        }
        double rate = Double.isNaN(rateFileValue) ? schedule.plannedRate(nowMs) : rateFileValue;
        totalRate = rate;
        return rate;
    }
}

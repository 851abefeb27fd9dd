package io.demeter.bench;

/**
 * Epoch milliseconds that never go backwards within a JVM. Event times and watermarks come from
 * it: the watermark generator relies on "the next record's time is at least now" so no record is
 * ever late, which a wall clock stepped back by NTP would break.
 */
final class BenchClock {
    private static final long BASE_MS = System.currentTimeMillis();
    private static final long BASE_NS = System.nanoTime();

    private BenchClock() {}

    static long nowMs() {
        return BASE_MS + (System.nanoTime() - BASE_NS) / 1_000_000L;
    }
}

package io.demeter.bench;

import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The job's total target rate (records/s over all source subtasks) as a function of time.
 * Precedence: the rate file while it holds a number, else the trace, else the fixed rate.
 * Serializable: built in main() and shipped with the job graph, so the trace is read once by the
 * submitter and {@code t0} stays the same across failovers of the job.
 *
 * <p>Without a rate file the schedule is also a count: {@link #dueBy} records are due since
 * {@code t0}, and {@link #dueAtMs} inverts it. That is what lets the source keep a backlog like a
 * message queue would: what was due while the job was down or back-pressured is emitted later,
 * stamped with the time it was due.
 */
final class RateSchedule implements Serializable {
    private static final long serialVersionUID = 1L;

    private final double fixedRate;
    private final int[] trace;
    private final double traceSpeedup;
    private final double rateScale;
    private final long t0Ms;
    private final String rateFile;
    /** Records due by the start of each trace row, at scale 1 (rows.length + 1 entries). */
    private transient long[] prefix;
    private transient long rateFileReadAtMs = Long.MIN_VALUE;
    private transient double rateFileValue = Double.NaN;

    RateSchedule(double fixedRate, int[] trace, double traceSpeedup, double rateScale, long t0Ms, String rateFile) {
        this.fixedRate = fixedRate;
        this.trace = trace;
        this.traceSpeedup = traceSpeedup;
        this.rateScale = rateScale;
        this.t0Ms = t0Ms;
        this.rateFile = rateFile;
    }

    /** Values of a {@code timestamp|value} trace (one row per second, header line skipped). */
    static int[] readTrace(Path path, long offsetRows) throws IOException {
        List<String> lines = Files.readAllLines(path, StandardCharsets.UTF_8);
        return lines.stream()
                .skip(1 + offsetRows)
                .map(String::trim)
                .filter(l -> !l.isEmpty())
                .mapToInt(l -> (int) Math.round(Double.parseDouble(l.substring(l.indexOf('|') + 1).trim())))
                .toArray();
    }

    /** Rate from the trace or fixed rate at {@code nowMs}; the trace loops when it runs out. */
    double plannedRate(long nowMs) {
        if (trace != null && trace.length > 0) {
            long row = (long) Math.floor(Math.max(0, nowMs - t0Ms) / 1000.0 * traceSpeedup);
            return trace[(int) (row % trace.length)] * rateScale;
        }
        return fixedRate;
    }

    /** Whether {@link #dueBy} and {@link #dueAtMs} are known: not while a rate file rules. */
    boolean replayable() {
        return rateFile == null;
    }

    /** Records due over the whole job from {@code t0} to {@code nowMs}. */
    double dueBy(long nowMs) {
        double seconds = Math.max(0, nowMs - t0Ms) / 1000.0;
        if (trace == null || trace.length == 0) {
            return fixedRate * seconds;
        }
        long[] sums = prefix();
        double rows = seconds * traceSpeedup;
        long loops = (long) Math.floor(rows / trace.length);
        double rest = rows - (double) loops * trace.length;
        int row = Math.min(trace.length - 1, (int) Math.floor(rest));
        double records = (double) loops * sums[trace.length] + sums[row] + (rest - row) * Math.max(0, trace[row]);
        return records * rateScale / traceSpeedup;
    }

    /** When {@code records} will have been due (inverse of {@link #dueBy}); MAX if never. */
    long dueAtMs(double records) {
        if (trace == null || trace.length == 0) {
            return fixedRate > 0 ? t0Ms + toMs(records / fixedRate) : Long.MAX_VALUE;
        }
        long[] sums = prefix();
        long perLoop = sums[trace.length];
        if (perLoop <= 0 || rateScale <= 0 || traceSpeedup <= 0) {
            return Long.MAX_VALUE;
        }
        double unscaled = records * traceSpeedup / rateScale;
        double loops = Math.floor(unscaled / perLoop);
        double rest = unscaled - loops * perLoop;
        // The first row by whose end `rest` records are due (rows of rate 0 take no room).
        int lo = 0;
        int hi = trace.length - 1;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (sums[mid + 1] >= rest) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        double within = trace[lo] > 0 ? Math.min(1.0, Math.max(0.0, rest - sums[lo]) / trace[lo]) : 0.0;
        double rows = loops * trace.length + lo + within;
        return t0Ms + toMs(rows / traceSpeedup);
    }

    private static long toMs(double seconds) {
        double ms = Math.ceil(seconds * 1000.0);
        return ms >= Long.MAX_VALUE / 2.0 ? Long.MAX_VALUE / 2 : (long) ms;
    }

    private long[] prefix() {
        if (prefix == null) {
            long[] sums = new long[trace.length + 1];
            for (int i = 0; i < trace.length; i++) {
                sums[i + 1] = sums[i] + Math.max(0, trace[i]);
            }
            prefix = sums;
        }
        return prefix;
    }

    String rateFile() {
        return rateFile;
    }

    /** {@link #readRateFile}, read at most once a second. */
    double readRateFileThrottled(long nowMs) {
        if (rateFileReadAtMs == Long.MIN_VALUE || nowMs - rateFileReadAtMs >= 1000L) {
            rateFileValue = readRateFile();
            rateFileReadAtMs = nowMs;
        }
        return rateFileValue;
    }

    /** The number in the rate file, or NaN when there is no file or it does not parse. */
    double readRateFile() {
        if (rateFile == null) {
            return Double.NaN;
        }
        try {
            return Double.parseDouble(Files.readString(Path.of(rateFile), StandardCharsets.UTF_8).trim());
        } catch (IOException | NumberFormatException e) {
            return Double.NaN;
        }
    }
}

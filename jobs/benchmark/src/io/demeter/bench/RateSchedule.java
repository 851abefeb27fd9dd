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
 */
final class RateSchedule implements Serializable {
    private static final long serialVersionUID = 1L;

    private final double fixedRate;
    private final int[] trace;
    private final double traceSpeedup;
    private final double rateScale;
    private final long t0Ms;
    private final String rateFile;

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

    String rateFile() {
        return rateFile;
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

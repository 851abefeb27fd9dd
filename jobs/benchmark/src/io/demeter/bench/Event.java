package io.demeter.bench;

/** One generated record. A Flink POJO: public fields and a no-argument constructor. */
public class Event {
    /** Sequence number: the DataGeneratorSource index, unique and deterministic per split. */
    public long seq;
    /** Event time = when the record was due at the source (see BacklogReader), ms on {@link BenchClock}. */
    public long ts;
    /** Grouping key, {@code seq % keys}, so each key sees an arithmetic run of sequence numbers. */
    public int key;

    public Event() {}

    public Event(long seq, long ts, int key) {
        this.seq = seq;
        this.ts = ts;
        this.key = key;
    }
}

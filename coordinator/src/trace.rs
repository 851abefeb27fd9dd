//! Rate traces: the `timestamp|value` text format of `data/traces/` (a header line, then one
//! `unix-seconds|events-per-second` pair per line). Pure parser: the caller reads the file, so
//! the forecast benchmark, the tests and the digital twin share one definition of the format.

use crate::{Error, Result};

/// The header every trace starts with.
pub const HEADER: &str = "timestamp|value";

/// One observation: the input rate (events/s) during the second starting at `t_s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatePoint {
    pub t_s: u64,
    pub rate: f64,
}

/// A parsed trace: strictly increasing timestamps, finite non-negative rates. Seconds may be
/// missing (gaps); consumers decide what a gap means.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RateTrace {
    pub points: Vec<RatePoint>,
}

impl RateTrace {
    /// Seconds from the first to the last point, 0 for fewer than two points.
    pub fn span_s(&self) -> u64 {
        match (self.points.first(), self.points.last()) {
            (Some(first), Some(last)) => last.t_s - first.t_s,
            _ => 0,
        }
    }

    /// Number of seconds inside the span that have no observation.
    pub fn missing_seconds(&self) -> u64 {
        if self.points.is_empty() {
            return 0;
        }
        self.span_s() + 1 - self.points.len() as u64
    }
}

/// Parses a whole trace. Blank lines (e.g. a trailing newline) are skipped; CRLF is accepted.
/// Errors name the 1-based line and what is wrong with it.
pub fn parse_rate_trace(text: &str) -> Result<RateTrace> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
    let header = lines.find(|(_, l)| !l.is_empty());
    match header {
        Some((_, l)) if l.eq_ignore_ascii_case(HEADER) => {}
        Some((line, l)) => {
            return Err(trace_error(
                line,
                format!("expected header `{HEADER}`, found `{}`", shorten(l)),
            ));
        }
        None => return Err(trace_error(1, format!("empty trace: no `{HEADER}` header"))),
    }
    let mut points: Vec<RatePoint> = Vec::new();
    for (line, l) in lines.filter(|(_, l)| !l.is_empty()) {
        let point = parse_line(line, l)?;
        if let Some(prev) = points.last()
            && point.t_s <= prev.t_s
        {
            return Err(trace_error(
                line,
                format!(
                    "timestamp {} is not after the previous one ({}); traces must be sorted \
                     without duplicates",
                    point.t_s, prev.t_s
                ),
            ));
        }
        points.push(point);
    }
    Ok(RateTrace { points })
}

fn parse_line(line: usize, l: &str) -> Result<RatePoint> {
    let mut fields = l.split('|');
    let (Some(ts), Some(value), None) = (fields.next(), fields.next(), fields.next()) else {
        return Err(trace_error(
            line,
            format!("expected two `|`-separated fields, found `{}`", shorten(l)),
        ));
    };
    let t_s = ts.trim().parse::<u64>().map_err(|e| {
        trace_error(
            line,
            format!("timestamp `{}` is not unix seconds: {e}", shorten(ts)),
        )
    })?;
    let rate = value.trim().parse::<f64>().map_err(|e| {
        trace_error(
            line,
            format!("value `{}` is not a number: {e}", shorten(value)),
        )
    })?;
    if !rate.is_finite() || rate < 0.0 {
        return Err(trace_error(
            line,
            format!("value {rate} is not a finite non-negative rate"),
        ));
    }
    Ok(RatePoint { t_s, rate })
}

fn trace_error(line: usize, message: String) -> Error {
    Error::Trace { line, message }
}

/// Keeps error messages readable when a binary file is fed in by mistake.
fn shorten(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn err_of(text: &str) -> (usize, String) {
        match parse_rate_trace(text) {
            Err(Error::Trace { line, message }) => (line, message),
            other => panic!("expected a trace error, got {other:?}"),
        }
    }

    #[test]
    fn parses_header_points_gaps_and_crlf() {
        let trace = parse_rate_trace("timestamp|value\r\n10|5\r\n11|6.5\r\n14|0\r\n\r\n").unwrap();
        assert_eq!(trace.points.len(), 3);
        assert_eq!(trace.points[1], RatePoint { t_s: 11, rate: 6.5 });
        assert_eq!(trace.span_s(), 4);
        assert_eq!(trace.missing_seconds(), 2);
    }

    #[test]
    fn header_only_is_an_empty_trace() {
        let trace = parse_rate_trace("timestamp|value\n").unwrap();
        assert!(trace.points.is_empty());
        assert_eq!(trace.missing_seconds(), 0);
    }

    #[test]
    fn missing_or_wrong_header_is_reported_on_its_line() {
        assert_eq!(err_of("").0, 1);
        let (line, message) = err_of("\nts,value\n1|2\n");
        assert_eq!(line, 2);
        assert!(message.contains("expected header"), "{message}");
    }

    #[test]
    fn bad_fields_name_the_line_and_the_problem() {
        let (line, message) = err_of("timestamp|value\n1|2\n2|abc\n");
        assert_eq!(line, 3);
        assert!(message.contains("`abc` is not a number"), "{message}");

        let (line, message) = err_of("timestamp|value\n-1|2\n");
        assert_eq!(line, 2);
        assert!(message.contains("not unix seconds"), "{message}");

        let (line, message) = err_of("timestamp|value\n1|2|3\n");
        assert_eq!(line, 2);
        assert!(message.contains("two `|`-separated fields"), "{message}");

        let (_, message) = err_of("timestamp|value\n1\n");
        assert!(message.contains("two `|`-separated fields"), "{message}");
    }

    #[test]
    fn negative_or_non_finite_rates_are_rejected() {
        assert!(err_of("timestamp|value\n1|-3\n").1.contains("non-negative"));
        assert!(
            err_of("timestamp|value\n1|NaN\n")
                .1
                .contains("non-negative")
        );
        assert!(
            err_of("timestamp|value\n1|inf\n")
                .1
                .contains("non-negative")
        );
    }

    #[test]
    fn unsorted_or_duplicate_timestamps_are_rejected() {
        let (line, message) = err_of("timestamp|value\n5|1\n5|2\n");
        assert_eq!(line, 3);
        assert!(message.contains("not after the previous"), "{message}");
        assert_eq!(err_of("timestamp|value\n5|1\n4|2\n").0, 3);
    }

    #[test]
    fn error_display_includes_line_number() {
        let err = parse_rate_trace("timestamp|value\n1|x\n").unwrap_err();
        assert!(err.to_string().starts_with("rate trace line 2:"), "{err}");
    }

    #[test]
    fn long_garbage_is_shortened_in_messages() {
        let garbage = "x".repeat(500);
        let (_, message) = err_of(&garbage);
        assert!(message.len() < 120, "{message}");
    }

    #[test]
    fn shipped_traces_parse() {
        for name in [
            "ADS_3D_1S_4_sub_30K_max.csv",
            "CARS_3D_1S_4_sub_35K_max.csv",
        ] {
            let path = format!("{}/../data/traces/{name}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).unwrap();
            let trace = parse_rate_trace(&text).unwrap();
            assert!(trace.points.len() > 60_000, "{name}");
        }
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The parser returns an error or a sorted trace for any input, and never panics.
        #[test]
        fn any_text_parses_or_fails_cleanly(body in "(\\PC{0,30}\n){0,20}") {
            let text = format!("{HEADER}\n{body}");
            match parse_rate_trace(&text) {
                Ok(trace) => prop_assert!(trace.points.windows(2).all(|w| w[0].t_s < w[1].t_s)),
                Err(Error::Trace { line, .. }) => prop_assert!(line >= 2),
                Err(other) => prop_assert!(false, "unexpected error {other}"),
            }
        }
    }
}

use demeter_coordinator::models::forecast::*;
use demeter_coordinator::trace::parse_rate_trace;
fn main() {
    for name in [
        "ADS_3D_1S_4_sub_30K_max.csv",
        "CARS_3D_1S_4_sub_35K_max.csv",
    ] {
        let text = std::fs::read_to_string(format!("data/traces/{name}")).unwrap();
        let points = parse_rate_trace(&text).unwrap().points;
        let cfg = EvalConfig {
            horizon_s: 600,
            every_s: 60,
            warmup_s: 3600,
        };
        let mut noseason = ForecastConfig::default();
        noseason.season.detect = false;
        noseason.season.known_periods_s.clear();
        for (label, c) in [
            ("default", ForecastConfig::default()),
            ("noseason", noseason),
        ] {
            let mut f = OnlineForecaster::new(c).unwrap();
            let s = evaluate(&mut f, &points, cfg);
            println!("{name} {label} {s:?} period {:?}", f.period_s());
        }
        let s = evaluate(&mut HoltBaseline::default(), &points, cfg);
        println!("{name} holt {s:?}");
    }
}

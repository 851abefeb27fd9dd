use demeter_coordinator::models::forecast::*;
use demeter_coordinator::trace::parse_rate_trace;
fn main() {
    let text = std::fs::read_to_string("data/traces/CARS_3D_1S_4_sub_35K_max.csv").unwrap();
    let points = parse_rate_trace(&text).unwrap().points;
    let mut total = 0.0;
    for _ in 0..10 {
        let mut f = OnlineForecaster::new(ForecastConfig::default()).unwrap();
        for p in &points {
            f.observe(p.t_s, p.rate);
        }
        total += f.forecast(600).unwrap().point_max;
    }
    println!("{total}");
}

use demeter_coordinator::models::forecast::*;
use demeter_coordinator::trace::parse_rate_trace;
fn main() {
    for name in [
        "ADS_3D_1S_4_sub_30K_max.csv",
        "CARS_3D_1S_4_sub_35K_max.csv",
    ] {
        let text = std::fs::read_to_string(format!("data/traces/{name}")).unwrap();
        let p = parse_rate_trace(&text).unwrap().points;
        let mut f = OnlineForecaster::new(ForecastConfig::default()).unwrap();
        let (mut bias, mut n) = (0.0, 0);
        for i in 0..p.len() - 600 {
            f.observe(p[i].t_s, p[i].rate);
            if i >= 3600 && i % 60 == 0 {
                let truth = p[i + 1..=i + 600]
                    .iter()
                    .map(|q| q.rate)
                    .fold(0.0, f64::max);
                let fc = f.forecast(600).unwrap();
                bias += (fc.point_max - truth) / truth;
                n += 1;
            }
        }
        println!("{name} mean relative bias {:.4}", bias / n as f64);
    }
}

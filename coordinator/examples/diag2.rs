use demeter_coordinator::models::forecast::*;
use std::time::Instant;
fn main() {
    for n in [1080usize, 2880, 5880] {
        let v: Vec<f64> = (0..n)
            .map(|i| (i as f64 / 57.0).sin() * 100.0 + (i as f64 * 0.37).cos())
            .collect();
        let cfg = SeasonConfig::default();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            let p = choose_period(&v, &cfg);
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(p);
        }
        println!("n={n} choose_period {best:.2} ms");
    }
}

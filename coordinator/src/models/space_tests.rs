#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn display_and_parse_round_trip() {
    let config: JobConfig = "p=12,slots=2,mem=2048m,cpu=1.5,ckpt=30s".parse().unwrap();
    assert_eq!(config.tm_cpu_millis, 1500);
    assert_eq!(
        config.to_string(),
        "p=12,slots=2,mem=2048m,cpu=1.5,ckpt=30s"
    );
    let other: JobConfig = "ckpt=30, cpu=1.5, mem=2g, slots=2, p=12".parse().unwrap();
    assert_eq!(config, other);
}

#[test]
fn parse_rejects_missing_unknown_and_zero() {
    assert!(
        "p=12,slots=2,mem=2048m,cpu=1.5"
            .parse::<JobConfig>()
            .is_err()
    );
    assert!(
        "p=12,slots=2,mem=2048m,cpu=1.5,ckpt=30s,x=1"
            .parse::<JobConfig>()
            .is_err()
    );
    assert!(
        "p=0,slots=2,mem=2048m,cpu=1.5,ckpt=30s"
            .parse::<JobConfig>()
            .is_err()
    );
    assert!(
        "p=12,slots=two,mem=2048m,cpu=1.5,ckpt=30s"
            .parse::<JobConfig>()
            .is_err()
    );
}

#[test]
fn cost_follows_task_managers() {
    let config: JobConfig = "p=10,slots=4,mem=2g,cpu=1.5,ckpt=30".parse().unwrap();
    assert_eq!(config.task_managers(), 3);
    assert!((config.total_cpu_cores() - 4.5).abs() < 1e-12);
    assert!((config.total_memory_mb() - 6144.0).abs() < 1e-12);
}

#[test]
fn default_space_is_the_papers_grid() {
    let space = SearchSpace::default();
    assert!(space.candidates().len() >= 840);
    assert!(space.candidates().contains(&JobConfig::paper_default()));
    let round_trip = SearchSpace::from_toml(&space.to_toml().unwrap()).unwrap();
    assert_eq!(space, round_trip);
}

#[test]
fn validity_rules_exclude_configs() {
    let space = SearchSpace {
        max_parallelism: 16,
        ..SearchSpace::default()
    };
    assert!(space.candidates().iter().all(|c| c.parallelism <= 16));
    let starved: JobConfig = "p=8,slots=4,mem=512m,cpu=1,ckpt=10".parse().unwrap();
    assert!(space.violation(&starved).is_some());
    let empty = "parallelism = [64]\nmax_parallelism = 32\n";
    assert!(SearchSpace::from_toml(empty).is_err());
}

#[test]
fn the_cluster_bounds_what_a_configuration_may_take_in_total() {
    let text = "max_total_cpu_cores = 30.0\nmax_total_memory_mb = 65536.0\n";
    let space = SearchSpace::from_toml(text).unwrap();
    let candidates = space.candidates();
    assert!(!candidates.is_empty());
    assert!(candidates.iter().all(|c| c.total_cpu_cores() <= 30.0));
    assert!(candidates.iter().all(|c| c.total_memory_mb() <= 65_536.0));
    // 24 three-core TaskManagers: 72 cores.
    let large: JobConfig = "p=24,slots=1,mem=1g,cpu=3,ckpt=10".parse().unwrap();
    let why = space.violation(&large).unwrap_or_default();
    assert!(why.contains("30 CPU cores"), "{why}");
    // 16 four-GB TaskManagers: 64 GB, exactly the bound.
    let at_bound: JobConfig = "p=16,slots=1,mem=4g,cpu=1,ckpt=10".parse().unwrap();
    assert_eq!(space.violation(&at_bound), None);
    let over: JobConfig = "p=20,slots=1,mem=4g,cpu=1,ckpt=10".parse().unwrap();
    assert!(space.violation(&over).is_some());
    assert!(SearchSpace::from_toml("max_total_cpu_cores = 0.0\n").is_err());
    // Unset, the bounds stay out of the written form.
    assert!(
        !SearchSpace::default()
            .to_toml()
            .unwrap()
            .contains("max_total")
    );
}

#[test]
fn normalise_maps_grid_to_unit_cube() {
    let space = SearchSpace::default();
    for config in space.candidates() {
        let x = space.normalise(&config, 20_000.0);
        assert!(x[..5].iter().all(|v| (0.0..=1.0).contains(v)));
        assert!((x[5] - 0.5).abs() < 1e-12);
    }
    for config in space.candidates() {
        let (back, rate) = space.denormalise(&space.normalise(&config, 12_345.0));
        assert_eq!(back, config);
        assert!((rate - 12_345.0).abs() < 1e-6);
    }
    let off_grid: JobConfig = "p=30,slots=2,mem=1536m,cpu=0.5,ckpt=5".parse().unwrap();
    assert_eq!(
        space.denormalise(&space.normalise(&off_grid, 1.0)).0,
        off_grid
    );
    let starved: JobConfig = "p=8,slots=4,mem=1g,cpu=1,ckpt=10".parse().unwrap();
    assert_eq!(
        space.normalise(&starved, 0.0),
        [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    );
    let rich: JobConfig = "p=24,slots=1,mem=4g,cpu=3,ckpt=90".parse().unwrap();
    let x = space.normalise(&rich, space.max_rate);
    assert!(
        x.iter()
            .enumerate()
            .all(|(i, v)| (v - if i == 1 { 0.0 } else { 1.0 }).abs() < 1e-12)
    );
}

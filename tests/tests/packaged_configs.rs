//! The configs shipped in the .deb packages, the Ansible templates' schema, and the example
//! configs all parse with the binaries' own config types: the ops files cannot drift from the
//! code unnoticed.

use std::path::Path;

use demeter_agent::config::AgentConfig;
use demeter_common::config::load_toml;
use demeter_coordinator::config::CoordinatorConfig;

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

#[test]
fn agent_configs_parse() {
    for file in ["packaging/agent.toml", "agent/agent.example.toml"] {
        let config: AgentConfig = load_toml(&repo(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            config.coordinator.contains(':'),
            "{file}: coordinator must be host:port"
        );
    }
}

#[test]
fn coordinator_configs_parse() {
    for file in [
        "packaging/coordinator.toml",
        "coordinator/coordinator.example.toml",
    ] {
        let config: CoordinatorConfig =
            load_toml(&repo(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(config.flink.rest_url.starts_with("http://"), "{file}");
    }
}

/// The example's commented-out `[[tuning.jobs]]` block is documentation an operator uncomments:
/// it must parse and validate once uncommented.
#[test]
fn the_example_tuning_block_parses_when_uncommented() {
    let text = std::fs::read_to_string(repo("coordinator/coordinator.example.toml")).unwrap();
    let start = text.find("# [[tuning.jobs]]").expect("tuning example");
    let (head, tail) = text.split_at(start);
    let uncommented: String = tail
        .lines()
        .map(|l| l.strip_prefix("# ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let config: CoordinatorConfig = toml::from_str(&format!("{head}{uncommented}\n")).unwrap();
    let job = &config.tuning.jobs[0];
    assert_eq!(job.policy, "demeter");
    assert!(job.profiling.is_some());
    job.validate().unwrap();
}

#[test]
fn ansible_templates_render_to_parsable_configs() {
    // Substitute every Jinja expression with a plausible value of the right shape.
    let render = |file: &str, values: &[(&str, &str)]| {
        let mut text = std::fs::read_to_string(repo(file)).unwrap();
        for (expr, value) in values {
            text = text.replace(expr, value);
        }
        assert!(
            !text.contains("{{"),
            "{file}: unrendered expression left in\n{text}"
        );
        text
    };
    let agent = render(
        "ansible/roles/demeter_agent/templates/agent.toml.j2",
        &[
            ("{{ ansible_managed }}", "managed"),
            ("{{ demeter_agent_node_name }}", "node-1"),
            (
                "{{ demeter_agent_coordinator_address | trim }}",
                "ctl1:7443",
            ),
            ("{{ demeter_agent_coordinator_name }}", "ctl1"),
            ("{{ demeter_agent_tls_dir }}", "/etc/demeter/tls"),
            ("{{ demeter_agent_tls_file }}", "node"),
            ("{{ demeter_agent_sample_interval_ms }}", "1000"),
            ("{{ demeter_agent_supervisor }}", "systemd"),
        ],
    );
    demeter_common::config::parse_toml::<AgentConfig>(Path::new("agent.toml.j2"), &agent).unwrap();
    let coordinator = render(
        "ansible/roles/demeter_coordinator/templates/coordinator.toml.j2",
        &[
            ("{{ ansible_managed }}", "managed"),
            ("{{ demeter_coordinator_quic_listen }}", "0.0.0.0:7443"),
            ("{{ demeter_coordinator_tls_dir }}", "/etc/demeter/tls"),
            (
                "{{ demeter_coordinator_flink_rest_url | trim }}",
                "http://jm:8081",
            ),
        ],
    );
    demeter_common::config::parse_toml::<CoordinatorConfig>(
        Path::new("coordinator.toml.j2"),
        &coordinator,
    )
    .unwrap();
}

//! `demeter-coordinator certs …`: the cluster's own certificate authority.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use demeter_common::protocol::Role;
use demeter_common::tls;
use time::{Duration, OffsetDateTime};

#[derive(Debug, Args)]
pub struct CertsArgs {
    #[command(subcommand)]
    command: CertsCommand,
}

#[derive(Debug, Subcommand)]
enum CertsCommand {
    /// Create the cluster CA: DIR/ca.pem (public) and DIR/ca.key (mode 0600). Refuses to
    /// overwrite an existing CA.
    Init {
        /// Directory for the CA files; created if missing.
        #[arg(long)]
        dir: PathBuf,
        /// Cluster name written into the CA's subject.
        #[arg(long, default_value = "default")]
        cluster: String,
        /// Validity of the CA in days.
        #[arg(long, default_value_t = 3650)]
        days: i64,
    },
    /// Issue a node certificate signed by the CA in DIR: DIR/NAME.pem and DIR/NAME.key.
    Issue {
        /// Directory holding ca.pem and ca.key.
        #[arg(long)]
        dir: PathBuf,
        /// Node name: becomes the certificate's CN and DNS name; the coordinator knows agents by
        /// it, and agents verify the coordinator by it.
        #[arg(long)]
        name: String,
        /// What the holder may do: agent (reports, takes orders), coordinator (serves), cli
        /// (queries the fleet).
        #[arg(long)]
        role: Role,
        /// Validity in days.
        #[arg(long, default_value_t = 825)]
        days: i64,
    },
}

pub fn run(args: CertsArgs) -> anyhow::Result<()> {
    let now = OffsetDateTime::now_utc();
    // Back-date a little so a node whose clock lags by minutes still accepts a fresh certificate.
    let not_before = now - Duration::hours(1);
    match args.command {
        CertsCommand::Init { dir, cluster, days } => {
            tls::init_ca_dir(&dir, &cluster, not_before, now + Duration::days(days))
                .with_context(|| format!("creating the CA in {}", dir.display()))?;
            println!("CA created: {}", dir.join(tls::CA_CERT_FILE).display());
        }
        CertsCommand::Issue {
            dir,
            name,
            role,
            days,
        } => {
            let (cert, key) =
                tls::issue_into_dir(&dir, &name, role, not_before, now + Duration::days(days))
                    .with_context(|| format!("issuing a certificate for {name}"))?;
            println!(
                "issued {role} certificate {} (key {})",
                cert.display(),
                key.display()
            );
        }
    }
    Ok(())
}

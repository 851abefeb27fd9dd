//! `demeter-coordinator`: the binary edge. Parses the command line and hands over to the library.

mod cli;

fn main() -> anyhow::Result<()> {
    cli::run()
}

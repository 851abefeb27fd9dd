//! Loading TOML configuration files with errors that name the file and the problem.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Reads and parses a TOML file into `T`; unknown keys are rejected by `T`'s own serde settings.
pub fn load_toml<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_toml(path, &text)
}

pub fn parse_toml<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

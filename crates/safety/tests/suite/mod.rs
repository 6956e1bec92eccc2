//! The integration suite.

mod secret_artefacts;

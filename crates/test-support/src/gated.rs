//! A Chromium whose start is held back until the test lets it go.

use std::path::{Path, PathBuf};

/// A wrapper script that waits for a gate file before it runs the real
/// Chromium (`exec`, so the launched process is Chromium itself): a launch
/// through it cannot finish before [`open`](Self::open). Tests use it to
/// show what happens while a browser starts, by order rather than timing.
#[derive(Debug)]
pub struct GatedChromium {
    /// The wrapper, to launch as the browser's executable.
    pub executable: PathBuf,
    gate: PathBuf,
}

impl GatedChromium {
    /// Writes the wrapper into `dir`, around [`locate_chromium`](crate::locate_chromium)'s
    /// Chromium.
    ///
    /// # Errors
    /// When no Chromium is found or `dir` cannot be written.
    pub fn new(dir: &Path) -> std::io::Result<GatedChromium> {
        use std::os::unix::fs::PermissionsExt as _;
        let gate = dir.join("gate-open");
        let executable = dir.join("chromium-gated");
        let chromium = crate::locate_chromium().map_err(std::io::Error::other)?;
        std::fs::write(
            &executable,
            format!(
                "#!/bin/sh\nwhile [ ! -e '{}' ]; do sleep 0.02; done\nexec '{}' \"$@\"\n",
                gate.display(),
                chromium.display()
            ),
        )?;
        std::fs::set_permissions(&executable, std::fs::Permissions::from_mode(0o755))?;
        Ok(GatedChromium { executable, gate })
    }

    /// Lets the wrapper start Chromium.
    ///
    /// # Errors
    /// When the gate file cannot be written.
    pub fn open(&self) -> std::io::Result<()> {
        std::fs::write(&self.gate, "")
    }

    /// Whether [`open`](Self::open) was called.
    pub fn is_open(&self) -> bool {
        self.gate.exists()
    }
}

mod browser_toolset;
mod e2e;
mod modes;
mod safety;
mod zoom;

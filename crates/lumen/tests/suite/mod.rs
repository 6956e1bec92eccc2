mod browser_toolset;
mod e2e;
mod safety;
mod zoom;

mod browser_toolset;
mod browser_toolset_members;
mod e2e;
mod modes;
mod safety;
mod zoom;

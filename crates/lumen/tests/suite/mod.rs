mod browser_toolset;
mod browser_toolset_members;
mod e2e;
mod modes;
mod network_policy;
mod own_tools;
mod safety;
mod zoom;

mod e2e;
mod safety;
mod zoom;

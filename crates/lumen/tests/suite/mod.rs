mod e2e;
mod safety;

mod common;
mod connect;
mod input;
mod navigation;
mod pages;
mod perceive;

mod common;
mod connect;
mod input;
mod navigation;
mod page_link;
mod page_state;
mod pages;
mod perceive;
